// The chat page's conversation list: pinned first, then newest activity first (the server's
// order), with pin, rename and delete on each.

import { api } from './api.js';
import { h, clear, badge, busy, dialog, empty, errorBox, field, toast } from './ui.js';

const enc = encodeURIComponent;

/**
 * `onOpen(conversation)` opens one; `onChanged(conversation)` and `onDeleted(id)` tell the page
 * about a rename/pin or a deletion. Returns {el, load(), setCurrent(id)}.
 */
export function conversationList({ onOpen, onChanged, onDeleted }) {
  const list = h('ul', { class: 'chat-list', 'data-testid': 'conversations' });
  const problem = h('div');
  let current = null;
  let items = [];

  async function load() {
    try {
      const page = await api('/conversations', { query: { limit: 100 } });
      items = page.items || [];
      clear(problem);
      draw();
    } catch (err) {
      clear(problem, errorBox(err));
    }
  }

  function draw() {
    if (!items.length) {
      clear(list, h('li', {}, empty('No conversation yet. Write a message to start one.')));
      return;
    }
    clear(list, items.map(row));
  }

  function row(c) {
    const open = h('a', { href: `/console/chat/${enc(c.id)}`, class: 'chat-open', 'aria-current': c.id === current ? 'page' : null },
      c.title, c.pinned ? [' ', badge('pinned', 'canary')] : null);
    open.addEventListener('click', (ev) => {
      if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
      ev.preventDefault();
      ev.stopPropagation(); // the page switches conversations itself (its streams stay up)
      onOpen(c);
    });
    const pin = h('button', { type: 'button', class: 'small', 'data-action': 'pin', 'aria-label': `${c.pinned ? 'Unpin' : 'Pin'} ${c.title}` }, c.pinned ? 'Unpin' : 'Pin');
    pin.addEventListener('click', () => busy(pin, () => patch(c, { pinned: !c.pinned })));
    const rename = h('button', { type: 'button', class: 'small', 'data-action': 'rename', 'aria-label': `Rename ${c.title}` }, 'Rename');
    rename.addEventListener('click', () => renameDialog(c));
    const remove = h('button', { type: 'button', class: 'small danger', 'data-action': 'delete', 'aria-label': `Delete ${c.title}` }, 'Delete');
    remove.addEventListener('click', () => {
      if (!window.confirm(`Delete the conversation “${c.title}” with all its messages?`)) return;
      busy(remove, async () => {
        await api(`/conversations/${enc(c.id)}`, { method: 'DELETE' });
        toast(`“${c.title}” deleted.`, 'ok');
        onDeleted(c.id);
        await load();
      });
    });
    return h('li', { class: c.id === current ? 'current' : null, 'data-testid': 'conversation', 'data-id': c.id, 'data-pinned': String(c.pinned) },
      open, h('div', { class: 'actions' }, pin, rename, remove));
  }

  async function patch(c, body) {
    const changed = await api(`/conversations/${enc(c.id)}`, { method: 'PATCH', body });
    onChanged(changed);
    await load();
  }

  function renameDialog(c) {
    const title = h('input', { name: 'title', required: true, maxlength: 200, value: c.title, autocomplete: 'off' });
    const save = h('button', { type: 'submit', class: 'primary' }, 'Rename');
    const err = h('div');
    const form = h('form', {}, field('Title', title), err, h('div', { class: 'actions' }, save));
    const dlg = dialog(`Rename “${c.title}”`, form);
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      busy(save, async () => {
        try {
          await patch(c, { title: title.value.trim() });
          dlg.close();
        } catch (e) { clear(err, errorBox(e)); }
      });
    });
    title.select();
  }

  return {
    el: h('div', {}, problem, list),
    load,
    setCurrent(id) { current = id; draw(); },
  };
}
