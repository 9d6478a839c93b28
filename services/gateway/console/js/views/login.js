import { login } from '../api.js';
import { navigate } from '../app.js';
import { h, clear, errorBox } from '../ui.js';

export default {
  title: 'Log in',
  render(main, { query }) {
    const user = h('input', { name: 'username', autocomplete: 'username', required: true, autofocus: true });
    const pass = h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true });
    const message = h('div', { 'aria-live': 'polite' },
      query.get('expired') ? h('div', { class: 'notice warn' }, 'Your session ended. Please log in again.') : null);
    const submit = h('button', { type: 'submit', class: 'primary' }, 'Log in');
    const form = h('form', { class: 'login', 'aria-labelledby': 'login-title' },
      h('h1', { id: 'login-title' }, 'Agentix console'),
      h('div', { class: 'field' }, h('label', { for: 'login-user' }, 'Username'), Object.assign(user, { id: 'login-user' })),
      h('div', { class: 'field' }, h('label', { for: 'login-pass' }, 'Password'), Object.assign(pass, { id: 'login-pass' })),
      message,
      submit);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      submit.disabled = true;
      clear(message);
      try {
        await login(user.value.trim(), pass.value);
        const next = query.get('next');
        navigate(next && next.startsWith('/') && next !== '/login' ? next : '/', { replace: true });
      } catch (err) {
        clear(message, errorBox(err));
        pass.select();
      } finally {
        submit.disabled = false;
      }
    });
    main.append(h('div', { class: 'login-wrap' }, form));
    user.focus();
  },
};
