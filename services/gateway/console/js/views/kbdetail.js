// One knowledge base: its documents, uploads with a progress bar fed by the ingestion stream,
// and a search that shows each hybrid hit with the sources that found it.

import { api } from '../api.js';
import { h, clear, badge, busy, empty, errorBox, field, fmtNum, fmtTime, pager, select, table, toast } from '../ui.js';
import { followStream } from '../sse.js';
import { kbItems } from './kb.js';

/** Overall percent from an ingestion progress event (queued → parse → index → done). */
export function percentOf(stage, done, total) {
  const frac = total ? Math.min(1, done / total) : 0;
  if (stage === 'queued' || stage === 'retry') return 0;
  if (stage === 'parse') return 10 * (total ? frac : 0);
  if (stage === 'index') return 10 + 89 * frac;
  return 99 * frac;
}

const BATCH_FILES = 100; // the batch route's limit per request

function uploadRow(label) {
  const bar = h('progress', { max: 100, value: 0, 'aria-label': `Ingestion of ${label}` });
  const pct = h('span', { class: 'num', 'data-testid': 'upload-percent' }, '0 %');
  const stage = h('span', { class: 'muted small' }, 'uploading…');
  const row = h('div', { class: 'progress-row', 'data-upload': label },
    h('span', {}, h('strong', {}, label), h('br'), stage), bar, pct);
  return {
    row,
    set(percent, text) {
      const p = Math.max(0, Math.min(100, Math.round(percent)));
      bar.value = p;
      pct.textContent = `${p} %`;
      if (text) stage.textContent = text;
    },
    fail(text) { stage.textContent = ''; stage.append(badge('failed', 'error'), ` ${text}`); },
  };
}

export default {
  title: 'Knowledge base',
  render(main, { name }) {
    const kb = decodeURIComponent(name);
    const base = `/kb/${encodeURIComponent(kb)}`;
    const streams = new Set();
    const problem = h('div');
    const docsBox = h('div', { 'data-testid': 'documents' }, h('p', { class: 'muted' }, 'Loading…'));
    const uploads = h('div', { 'data-testid': 'uploads', 'aria-live': 'polite' });

    const docs = pager(
      (cursor) => api(`${base}/documents`, { query: { limit: 50, cursor } }),
      (items) => {
        clear(problem);
        clear(docsBox, items.length
          ? table([
            { label: 'Title', class: 'wrap', cell: (d) => d.title || d.filename || d.id },
            { label: 'Status', cell: (d) => badge(d.status || '—', d.status === 'ready' ? 'ok' : d.status) },
            { label: 'Chunks', class: 'num', cell: (d) => fmtNum(d.chunks ?? d.chunk_count) },
            { label: 'Size', class: 'num', cell: (d) => (d.size_bytes ?? d.size ? `${fmtNum(d.size_bytes ?? d.size)} B` : '—') },
            { label: 'Added', class: 'time', cell: (d) => fmtTime(d.created_at) },
            { label: 'Actions', cell: (d) => h('button', {
              type: 'button', class: 'small danger',
              onclick: (ev) => {
                if (!window.confirm(`Delete ${d.title || d.id}?`)) return;
                busy(ev.currentTarget, async () => { await api(`${base}/documents/${encodeURIComponent(d.id)}`, { method: 'DELETE' }); toast('Document deleted.', 'ok'); await docs.reload(); });
              },
            }, 'Delete') },
          ], items, { caption: `Documents of ${kb}`, rowAttrs: (d) => ({ 'data-doc': d.id }) })
          : empty('No document yet. Upload a .txt, .md, .html, .pdf or .docx file, or paste text.'));
      },
      (err) => clear(problem, errorBox(err)));
    const loadDocs = () => docs.reset();

    /** Follow one ingestion job to its end; resolves with the `done` data. */
    function watchJob(jobId, progress) {
      return new Promise((resolve) => {
        const s = followStream(`/kb/ingest/${encodeURIComponent(jobId)}/stream`, {
          onEvent({ event, data }) {
            if (event === 'progress') progress.set(percentOf(data.stage, data.done, data.total), `${data.stage} ${data.total ? `${data.done}/${data.total}` : ''}`);
            if (event === 'done') {
              if (data.status === 'done' || data.status === 'ready') progress.set(100, `done · ${fmtNum(data.chunks ?? 0)} chunks`);
              else progress.fail(data.error || data.status);
              resolve(data);
            }
          },
          onState(state, info) {
            if (state === 'error') { progress.fail(info.error.message); resolve(null); }
            if (state === 'ended') { streams.delete(s); }
          },
        });
        streams.add(s);
      });
    }

    async function ingest(label, request) {
      const progress = uploadRow(label);
      uploads.prepend(progress.row);
      try {
        const out = await request();
        if (out.duplicate) progress.set(100, out.detail || out.message || 'already in this knowledge base');
        else progress.set(0, 'queued');
        await watchJob(out.job_id, progress);
        await loadDocs();
      } catch (err) {
        progress.fail(err.message);
        toast(err.message, 'error');
      }
    }

    const fileInput = h('input', { type: 'file', multiple: true, accept: '.txt,.md,.markdown,.html,.htm,.pdf,.docx', 'data-testid': 'file-input' });
    const uploadBtn = h('button', { type: 'submit', class: 'primary' }, 'Upload');
    const uploadForm = h('form', { 'aria-label': 'Upload documents' }, field('Files', fileInput, '.txt .md .html .pdf .docx'), h('div', { class: 'actions' }, uploadBtn));
    uploadForm.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const files = [...fileInput.files];
      if (!files.length) { toast('Choose a file first.', 'error'); return; }
      fileInput.value = '';
      if (files.length === 1) {
        ingest(files[0].name, () => {
          const form = new FormData();
          form.append('file', files[0], files[0].name);
          return api(`${base}/documents`, { method: 'POST', form });
        });
        return;
      }
      for (let i = 0; i < files.length; i += BATCH_FILES) ingestBatch(files.slice(i, i + BATCH_FILES));
    });

    /** Several files in one request (the batch route), then one progress bar per file. */
    async function ingestBatch(files) {
      const rows = files.map((f) => uploadRow(f.name));
      uploads.prepend(...rows.map((r) => r.row));
      const form = new FormData();
      for (const f of files) form.append('file', f, f.name);
      let out;
      try {
        out = await api(`${base}/documents/batch`, { method: 'POST', form });
      } catch (err) {
        for (const r of rows) r.fail(err.message);
        toast(err.message, 'error');
        return;
      }
      const watched = (out.items || []).map((item, i) => {
        const progress = rows[i];
        if (!progress) return null;
        if (item.error) { progress.fail(item.error.message || item.error.code); return null; }
        if (item.duplicate) { progress.set(100, item.message || 'already in this knowledge base'); return null; }
        progress.set(0, 'queued');
        return watchJob(item.job_id, progress);
      });
      await Promise.all(watched.filter(Boolean));
      await loadDocs();
    }

    const title = h('input', { maxlength: 500 });
    const text = h('textarea', { rows: 5, style: 'font-family: inherit' });
    const pasteBtn = h('button', { type: 'submit' }, 'Add text');
    const pasteForm = h('form', { 'aria-label': 'Add a text document' }, field('Title', title), field('Text', text), h('div', { class: 'actions' }, pasteBtn));
    pasteForm.addEventListener('submit', (ev) => {
      ev.preventDefault();
      if (!text.value.trim()) { toast('The text is empty.', 'error'); return; }
      const body = { title: title.value.trim() || 'Untitled', text: text.value };
      title.value = '';
      text.value = '';
      ingest(body.title, () => api(`${base}/documents`, { method: 'POST', body }));
    });

    const query = h('input', { type: 'search', required: true, placeholder: 'What are you looking for?' });
    const topK = h('input', { type: 'number', min: 1, max: 50, value: 5, style: 'width: 5rem' });
    const mode = select(['hybrid', 'vector', 'fulltext', 'graph'], 'hybrid');
    const results = h('div', { 'data-testid': 'hits', 'aria-live': 'polite' });
    const searchBtn = h('button', { type: 'submit', class: 'primary' }, 'Search');
    const searchForm = h('form', { class: 'toolbar', role: 'search' },
      h('div', { style: 'flex: 1 1 16rem' }, field('Query', query)), field('Top k', topK), field('Mode', mode),
      h('div', { class: 'field' }, h('label', { 'aria-hidden': 'true' }, '\u00a0'), searchBtn));
    searchForm.addEventListener('submit', (ev) => {
      ev.preventDefault();
      busy(searchBtn, async () => {
        try {
          const out = await api(`${base}/search`, { method: 'POST', body: { query: query.value, top_k: Number(topK.value) || 5, mode: mode.value } });
          const hits = out.chunks || [];
          clear(results, hits.length ? hits.map((c, i) => h('article', { class: 'hit' },
            h('header', {},
              h('span', { class: 'score' }, `#${i + 1} · ${Number(c.score).toFixed(3)}`),
              h('strong', {}, c.title || c.doc_id),
              h('div', { class: 'sources', 'aria-label': 'found by' }, Object.entries(c.sources || {}).map(([src, v]) => badge(`${src}${typeof v === 'number' ? ` ${Number.isInteger(v) ? `#${v}` : v.toFixed(3)}` : v && typeof v === 'object' && v.rank !== undefined ? ` #${v.rank}` : ''}`, src === 'vector' ? 'running' : src === 'fulltext' ? 'ok' : 'waiting')))),
            h('p', { class: 'small' }, c.text)))
            : empty('No passage matches.'));
        } catch (err) { clear(results, errorBox(err)); }
      });
    });

    const heading = h('h1', {}, 'Knowledge base ', h('code', {}, kb));
    // An admin opens another user's KB by id (names are unique per user only): name it and its owner.
    if (/^kb_[0-9a-f]{20}$/.test(kb)) {
      api('/kb').then((body) => {
        const found = kbItems(body).find((k) => k.id === kb);
        if (found) clear(heading, 'Knowledge base ', h('code', {}, found.name), ' ', h('span', { class: 'muted small', 'data-testid': 'kb-owner' }, `of ${found.user_id}`));
      }).catch(() => { /* the id alone still says which KB this is */ });
    }
    main.append(
      h('div', { class: 'page-head' }, heading, h('a', { href: '/console/kb' }, 'All knowledge bases')),
      problem,
      h('div', { class: 'grid-2' },
        h('section', { class: 'panel', 'aria-labelledby': 'kb-up' }, h('h2', { id: 'kb-up' }, 'Upload'), uploadForm, uploads),
        h('section', { class: 'panel', 'aria-labelledby': 'kb-paste' }, h('h2', { id: 'kb-paste' }, 'Paste text'), pasteForm)),
      h('section', { class: 'panel', 'aria-labelledby': 'kb-search' }, h('h2', { id: 'kb-search' }, 'Search'), searchForm, results),
      h('section', { class: 'panel', 'aria-labelledby': 'kb-docs' }, h('h2', { id: 'kb-docs' }, 'Documents'), docsBox, docs.controls));
    loadDocs();
    return () => { for (const s of streams) s.close(); };
  },
};
