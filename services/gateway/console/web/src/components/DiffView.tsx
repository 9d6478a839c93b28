import { diffLines } from '../lib/diff';
import { Empty } from './ui';

/** A line diff of two texts, labelled as versions `a` and `b`. */
export function DiffView({ a, b, labelA, labelB }: { a: string | null | undefined; b: string | null | undefined; labelA: string; labelB: string }) {
  if (a === null || a === undefined || b === null || b === undefined) return <Empty message="Pick two versions to compare." />;
  const lines = diffLines(a, b);
  const added = lines.filter((l) => l.op === '+').length;
  const removed = lines.filter((l) => l.op === '-').length;
  return (
    <div>
      <p className="muted small">{added + removed ? `${labelA} → ${labelB}: ${added} added, ${removed} removed lines` : `${labelA} and ${labelB} are identical.`}</p>
      <div className="diff" role="region" aria-label={`Diff of ${labelA} and ${labelB}`} tabIndex={0}>
        {lines.map((l, i) => (
          <div key={i} className={l.op === '+' ? 'add' : l.op === '-' ? 'del' : ''}>
            <span className="ln" aria-hidden="true">{`${l.a ?? ''}`.padStart(3)} {`${l.b ?? ''}`.padStart(3)} {l.op}</span>
            <span className="sr-only">{l.op === '+' ? 'added: ' : l.op === '-' ? 'removed: ' : ''}</span>
            {l.text}
          </div>
        ))}
      </div>
    </div>
  );
}
