// One knowledge base: its documents, uploads with a progress bar fed by the ingestion stream,
// and a search that shows each hybrid hit with the sources that found it.

import { useEffect, useRef, useState } from 'react';
import { Link, useParams } from 'react-router-dom';
import { api } from '../lib/api';
import { fmtNum, fmtTime } from '../lib/format';
import { followStream, type Stream } from '../lib/sse';
import { Badge, BusyButton, DeleteButton, Empty, ErrorBox, Field, Loading, PageHead, Select, Table, toast, usePager, useTitle } from '../components/ui';
import { kbItems } from './Kb';

/** Overall percent from an ingestion progress event (queued → parse → index → done). */
export function percentOf(stage: string, done: number, total: number) {
  const frac = total ? Math.min(1, done / total) : 0;
  if (stage === 'queued' || stage === 'retry') return 0;
  if (stage === 'parse') return 10 * (total ? frac : 0);
  if (stage === 'index') return 10 + 89 * frac;
  return 99 * frac;
}

const BATCH_FILES = 100; // the batch route's limit per request

interface Upload { key: number; label: string; percent: number; stage: string; failed: string | null }

function UploadRow({ u }: { u: Upload }) {
  return (
    <div className="progress-row" data-upload={u.label}>
      <span><strong>{u.label}</strong><br /><span className="muted small">{u.failed !== null ? <><Badge text="failed" kind="error" /> {u.failed}</> : u.stage}</span></span>
      <progress max={100} value={u.percent} aria-label={`Ingestion of ${u.label}`} />
      <span className="num" data-testid="upload-percent">{u.percent} %</span>
    </div>
  );
}

export default function KbDetailPage() {
  const params = useParams();
  const kb = params.name!;
  useTitle('Knowledge base');
  const base = `/kb/${encodeURIComponent(kb)}`;
  const streams = useRef(new Set<Stream>());
  const [uploads, setUploads] = useState<Upload[]>([]);
  const seq = useRef(0);
  const [problem, setProblem] = useState<unknown>(null);
  const [owner, setOwner] = useState<{ name: string; user_id: string } | null>(null);
  const [title, setTitle] = useState('');
  const [text, setText] = useState('');
  const [query, setQuery] = useState('');
  const [topK, setTopK] = useState('5');
  const [mode, setMode] = useState('hybrid');
  const [hits, setHits] = useState<any[] | null>(null);
  const [searchErr, setSearchErr] = useState<unknown>(null);
  const fileInput = useRef<HTMLInputElement>(null);

  const docs = usePager<any>((cursor) => api(`${base}/documents`, { query: { limit: 50, cursor } }), setProblem);
  useEffect(() => { docs.reset(); }, [kb]); // eslint-disable-line react-hooks/exhaustive-deps
  useEffect(() => () => { for (const s of streams.current) s.close(); }, []);
  // An admin opens another user's KB by id (names are unique per user only): name it and its owner.
  useEffect(() => {
    if (!/^kb_[0-9a-f]{20}$/.test(kb)) return;
    api('/kb').then((body) => { const found = kbItems(body).find((k) => k.id === kb); if (found) setOwner(found); }).catch(() => {});
  }, [kb]);

  /** A new progress row; returns its updaters. Percentages only move forward. */
  const addRow = (label: string) => {
    const key = (seq.current += 1);
    setUploads((list) => [{ key, label, percent: 0, stage: 'uploading…', failed: null }, ...list]);
    const update = (patch: Partial<Upload>) => setUploads((list) => list.map((u) => (u.key === key ? { ...u, ...patch } : u)));
    return {
      set(percent: number, stage?: string) {
        const p = Math.max(0, Math.min(100, Math.round(percent)));
        setUploads((list) => list.map((u) => (u.key === key ? { ...u, percent: Math.max(u.percent, p), ...(stage ? { stage } : {}) } : u)));
      },
      fail(message: string) { update({ failed: message }); },
    };
  };
  type Row = ReturnType<typeof addRow>;

  /** Follow one ingestion job to its end; resolves with the `done` data. */
  const watchJob = (jobId: string, progress: Row) => new Promise<any>((resolve) => {
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
        if (state === 'ended') streams.current.delete(s);
      },
    });
    streams.current.add(s);
  });

  const ingest = async (label: string, request: () => Promise<any>) => {
    const progress = addRow(label);
    try {
      const out = await request();
      if (out.duplicate) progress.set(100, out.detail || out.message || 'already in this knowledge base');
      else progress.set(0, 'queued');
      await watchJob(out.job_id, progress);
      await docs.reset();
    } catch (err: any) {
      progress.fail(err.message);
      toast(err.message, 'error');
    }
  };

  /** Several files in one request (the batch route), then one progress bar per file. */
  const ingestBatch = async (files: File[]) => {
    const rows = files.map((f) => addRow(f.name));
    const form = new FormData();
    for (const f of files) form.append('file', f, f.name);
    let out;
    try {
      out = await api(`${base}/documents/batch`, { method: 'POST', form });
    } catch (err: any) {
      for (const r of rows) r.fail(err.message);
      toast(err.message, 'error');
      return;
    }
    const watched = (out.items || []).map((item: any, i: number) => {
      const progress = rows[i];
      if (!progress) return null;
      if (item.error) { progress.fail(item.error.message || item.error.code); return null; }
      if (item.duplicate) { progress.set(100, item.message || 'already in this knowledge base'); return null; }
      progress.set(0, 'queued');
      return watchJob(item.job_id, progress);
    });
    await Promise.all(watched.filter(Boolean));
    await docs.reset();
  };

  const items = docs.items;
  return (
    <>
      <PageHead title={owner ? <>Knowledge base <code>{owner.name}</code> <span className="muted small" data-testid="kb-owner">of {owner.user_id}</span></> : <>Knowledge base <code>{kb}</code></>}>
        <Link to="/kb">All knowledge bases</Link>
      </PageHead>
      <ErrorBox error={problem} />
      <div className="grid-2">
        <section className="panel" aria-labelledby="kb-up"><h2 id="kb-up">Upload</h2>
          <form aria-label="Upload documents" onSubmit={(ev) => {
            ev.preventDefault();
            const files = [...(fileInput.current?.files || [])];
            if (!files.length) { toast('Choose a file first.', 'error'); return; }
            fileInput.current!.value = '';
            if (files.length === 1) {
              ingest(files[0].name, () => {
                const form = new FormData();
                form.append('file', files[0], files[0].name);
                return api(`${base}/documents`, { method: 'POST', form });
              });
              return;
            }
            for (let i = 0; i < files.length; i += BATCH_FILES) ingestBatch(files.slice(i, i + BATCH_FILES));
          }}>
            <Field label="Files" hint=".txt .md .html .pdf .docx"><input ref={fileInput} type="file" multiple accept=".txt,.md,.markdown,.html,.htm,.pdf,.docx" data-testid="file-input" /></Field>
            <div className="actions"><button type="submit" className="primary">Upload</button></div>
          </form>
          <div data-testid="uploads" aria-live="polite">{uploads.map((u) => <UploadRow key={u.key} u={u} />)}</div>
        </section>
        <section className="panel" aria-labelledby="kb-paste"><h2 id="kb-paste">Paste text</h2>
          <form aria-label="Add a text document" onSubmit={(ev) => {
            ev.preventDefault();
            if (!text.trim()) { toast('The text is empty.', 'error'); return; }
            const body = { title: title.trim() || 'Untitled', text };
            setTitle('');
            setText('');
            ingest(body.title, () => api(`${base}/documents`, { method: 'POST', body }));
          }}>
            <Field label="Title"><input maxLength={500} value={title} onChange={(e) => setTitle(e.target.value)} /></Field>
            <Field label="Text"><textarea rows={5} style={{ fontFamily: 'inherit' }} value={text} onChange={(e) => setText(e.target.value)} /></Field>
            <div className="actions"><button type="submit">Add text</button></div>
          </form>
        </section>
      </div>
      <section className="panel" aria-labelledby="kb-search"><h2 id="kb-search">Search</h2>
        <form className="toolbar" role="search" onSubmit={(ev) => ev.preventDefault()}>
          <div style={{ flex: '1 1 16rem' }}><Field label="Query"><input type="search" required placeholder="What are you looking for?" value={query} onChange={(e) => setQuery(e.target.value)} /></Field></div>
          <Field label="Top k"><input type="number" min={1} max={50} style={{ width: '5rem' }} value={topK} onChange={(e) => setTopK(e.target.value)} /></Field>
          <Field label="Mode"><Select value={mode} onChange={(e) => setMode(e.target.value)} options={['hybrid', 'vector', 'fulltext', 'graph']} /></Field>
          <div className="field"><label aria-hidden="true">{'\u00a0'}</label>
            <BusyButton className="primary" action={async () => {
              setSearchErr(null);
              try {
                const out = await api(`${base}/search`, { method: 'POST', body: { query, top_k: Number(topK) || 5, mode } });
                setHits(out.chunks || []);
              } catch (err) { setHits(null); setSearchErr(err); }
            }}>Search</BusyButton></div>
        </form>
        <div data-testid="hits" aria-live="polite">
          <ErrorBox error={searchErr} />
          {hits === null ? null : hits.length ? hits.map((c, i) => (
            <article className="hit" key={`${c.doc_id}-${i}`}>
              <header>
                <span className="score">{`#${i + 1} · ${Number(c.score).toFixed(3)}`}</span>
                <strong>{c.title || c.doc_id}</strong>
                <div className="sources" aria-label="found by">{Object.entries(c.sources || {}).map(([src, v]: [string, any]) => (
                  <Badge key={src} kind={src === 'vector' ? 'running' : src === 'fulltext' ? 'ok' : 'waiting'}
                    text={`${src}${typeof v === 'number' ? ` ${Number.isInteger(v) ? `#${v}` : v.toFixed(3)}` : v && typeof v === 'object' && v.rank !== undefined ? ` #${v.rank}` : ''}`} />
                ))}</div>
              </header>
              <p className="small">{c.text}</p>
            </article>
          )) : <Empty message="No passage matches." />}
        </div>
      </section>
      <section className="panel" aria-labelledby="kb-docs"><h2 id="kb-docs">Documents</h2>
        <div data-testid="documents">
          {items === null ? <Loading /> : items.length ? (
            <Table caption={`Documents of ${kb}`} rows={items} rowKey={(d) => d.id} rowProps={(d) => ({ 'data-doc': d.id })} columns={[
              { label: 'Title', className: 'wrap', cell: (d) => d.title || d.filename || d.id },
              { label: 'Status', cell: (d) => <Badge text={d.status || '—'} kind={d.status === 'ready' ? 'ok' : d.status} /> },
              { label: 'Chunks', className: 'num', cell: (d) => fmtNum(d.chunks ?? d.chunk_count) },
              { label: 'Size', className: 'num', cell: (d) => (d.size_bytes ?? d.size ? `${fmtNum(d.size_bytes ?? d.size)} B` : '—') },
              { label: 'Added', className: 'time', cell: (d) => fmtTime(d.created_at) },
              { label: 'Actions', cell: (d) => (
                <DeleteButton what={d.title || d.id} ask={`Delete ${d.title || d.id}?`} done="Document deleted."
                  path={`${base}/documents/${encodeURIComponent(d.id)}`} after={docs.reload} />
              ) },
            ]} />
          ) : <Empty message="No document yet. Upload a .txt, .md, .html, .pdf or .docx file, or paste text." />}
        </div>
        {docs.controls}
      </section>
    </>
  );
}
