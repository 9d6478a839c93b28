import { api, session } from '../api.js';
import { navigate } from '../app.js';
import { h, clear, busy, empty, errorBox, field, fmtTime, table, toast } from '../ui.js';

export function kbItems(body) {
  return Array.isArray(body) ? body : body.items || body.kbs || [];
}

export default {
  title: 'Knowledge bases',
  render(main) {
    const problem = h('div');
    const listBox = h('div', { 'data-testid': 'kb-list' }, h('p', { class: 'muted' }, 'Loading…'));
    const name = h('input', { name: 'name', required: true, maxlength: 100, autocomplete: 'off', pattern: '[A-Za-z0-9][A-Za-z0-9 _.\\-]*' });
    const description = h('input', { name: 'description', maxlength: 2000 });
    const createErr = h('div');
    const create = h('button', { type: 'submit', class: 'primary' }, 'Create');
    const form = h('form', { class: 'panel', 'aria-labelledby': 'kb-new' },
      h('h2', { id: 'kb-new' }, 'New knowledge base'),
      h('div', { class: 'form-grid' }, field('Name', name, 'letters, digits, space, _ . -'), field('Description', description)),
      createErr, h('div', { class: 'actions' }, create));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      busy(create, async () => {
        clear(createErr);
        try {
          const kb = await api('/kb', { method: 'POST', body: { name: name.value.trim(), description: description.value.trim() || undefined } });
          toast(`Knowledge base ${kb.name || name.value} created.`, 'ok');
          navigate(`/kb/${encodeURIComponent(kb.name || name.value.trim())}`);
        } catch (err) { clear(createErr, errorBox(err)); }
      });
    });

    // An admin lists every user's KBs: the owner column says whose each is. Names are unique
    // only per user, so another user's KB is opened by its id.
    const me = session.user || {};
    const own = (k) => !k.user_id || k.user_id === me.name;
    const ref = (k) => (own(k) ? k.name : k.id);

    async function load() {
      const items = kbItems(await api('/kb'));
      clear(listBox, items.length
        ? table([
          { label: 'Name', cell: (k) => h('a', { href: `/console/kb/${encodeURIComponent(ref(k))}` }, k.name) },
          me.admin ? { label: 'Owner', cell: (k) => (own(k) ? h('span', {}, k.user_id || me.name, ' ', h('span', { class: 'muted small' }, '(you)')) : k.user_id) } : null,
          { label: 'Description', class: 'wrap', cell: (k) => k.description || '—' },
          { label: 'Documents', class: 'num', cell: (k) => k.documents ?? k.document_count ?? '—' },
          { label: 'Created', class: 'time', cell: (k) => fmtTime(k.created_at) },
          { label: 'Actions', cell: (k) => h('button', {
            type: 'button', class: 'small danger',
            'aria-label': `Delete ${k.name}${own(k) ? '' : ` of ${k.user_id}`}`,
            onclick: (ev) => {
              if (!window.confirm(`Delete ${k.name}${own(k) ? '' : ` (owned by ${k.user_id})`} with all its documents?`)) return;
              busy(ev.currentTarget, async () => { await api(`/kb/${encodeURIComponent(ref(k))}`, { method: 'DELETE' }); toast(`${k.name} deleted.`, 'ok'); await load(); });
            },
          }, 'Delete') },
        ].filter(Boolean), items, { caption: 'Knowledge bases', rowAttrs: (k) => ({ 'data-kb': k.name, 'data-owner': k.user_id || me.name }) })
        : empty('No knowledge base yet. Create one, then upload documents to it.'));
    }

    main.append(h('div', { class: 'page-head' }, h('h1', {}, 'Knowledge bases')), problem,
      h('section', { class: 'panel' }, h('h2', {}, me.admin ? 'All knowledge bases' : 'Your knowledge bases'), listBox), form);
    load().catch((err) => clear(problem, errorBox(err)));
  },
};
