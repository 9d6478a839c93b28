import { useCallback, useEffect, useState } from 'react';
import { Link, useNavigate } from 'react-router-dom';
import { api, session } from '../lib/api';
import { fmtTime } from '../lib/format';
import { DeleteButton, Empty, ErrorBox, Field, Loading, PageHead, Table, toast, useTitle } from '../components/ui';

export function kbItems(body: any): any[] {
  return Array.isArray(body) ? body : body.items || body.kbs || [];
}

export default function KbPage() {
  useTitle('Knowledge bases');
  const navigate = useNavigate();
  const [items, setItems] = useState<any[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [createErr, setCreateErr] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  // An admin lists every user's KBs: the owner column says whose each is. Names are unique
  // only per user, so another user's KB is opened by its id.
  const me = session.user || { name: '', admin: false };
  const own = (k: any) => !k.user_id || k.user_id === me.name;
  const ref = (k: any) => (own(k) ? k.name : k.id);
  const load = useCallback(async () => setItems(kbItems(await api('/kb'))), []);
  useEffect(() => { load().catch(setProblem); }, [load]);
  return (
    <>
      <PageHead title="Knowledge bases" />
      <ErrorBox error={problem} />
      <section className="panel"><h2>{me.admin ? 'All knowledge bases' : 'Your knowledge bases'}</h2>
        <div data-testid="kb-list">
          {items === null ? <Loading /> : items.length ? (
            <Table caption="Knowledge bases" rows={items} rowKey={(k) => k.id || k.name} rowProps={(k) => ({ 'data-kb': k.name, 'data-owner': k.user_id || me.name })} columns={[
              { label: 'Name', cell: (k) => <Link to={`/kb/${encodeURIComponent(ref(k))}`}>{k.name}</Link> },
              me.admin ? { label: 'Owner', cell: (k) => (own(k) ? <span>{k.user_id || me.name} <span className="muted small">(you)</span></span> : k.user_id) } : null,
              { label: 'Description', className: 'wrap', cell: (k) => k.description || '—' },
              { label: 'Documents', className: 'num', cell: (k) => k.documents ?? k.document_count ?? '—' },
              { label: 'Created', className: 'time', cell: (k) => fmtTime(k.created_at) },
              { label: 'Actions', cell: (k) => (
                <DeleteButton what={`${k.name}${own(k) ? '' : ` of ${k.user_id}`}`} path={`/kb/${encodeURIComponent(ref(k))}`}
                  ask={`Delete ${k.name}${own(k) ? '' : ` (owned by ${k.user_id})`} with all its documents?`}
                  done={`${k.name} deleted.`} after={load} />
              ) },
            ]} />
          ) : <Empty message="No knowledge base yet. Create one, then upload documents to it." />}
        </div>
      </section>
      <form className="panel" aria-labelledby="kb-new" onSubmit={async (ev) => {
        ev.preventDefault();
        setBusy(true);
        setCreateErr(null);
        try {
          const kb = await api('/kb', { method: 'POST', body: { name: name.trim(), description: description.trim() || undefined } });
          toast(`Knowledge base ${kb.name || name} created.`, 'ok');
          navigate(`/kb/${encodeURIComponent(kb.name || name.trim())}`);
        } catch (err) { setCreateErr(err); } finally { setBusy(false); }
      }}>
        <h2 id="kb-new">New knowledge base</h2>
        <div className="form-grid">
          <Field label="Name" hint="letters, digits, space, _ . -"><input name="name" required maxLength={100} autoComplete="off" pattern="[A-Za-z0-9][A-Za-z0-9 _.\-]*" value={name} onChange={(e) => setName(e.target.value)} /></Field>
          <Field label="Description"><input name="description" maxLength={2000} value={description} onChange={(e) => setDescription(e.target.value)} /></Field>
        </div>
        <ErrorBox error={createErr} />
        <div className="actions"><button type="submit" className="primary" disabled={busy}>Create</button></div>
      </form>
    </>
  );
}
