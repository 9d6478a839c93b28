// Undo and redo: snapshots of the document (DSL objects and positions) before each change.
// Nodes' and edges' DSL objects are never mutated, so a snapshot shares them and costs little.

import type { EditorDoc } from './doc';

const LIMIT = 200;

export class History {
  past: EditorDoc[] = [];
  future: EditorDoc[] = [];
  private lastKey: string | null = null;
  private lastAt = 0;

  /**
   * Remember `doc` as the state before a change. Changes with the same `coalesce` key within
   * `windowMs` (typing in one field) are one step.
   */
  push(doc: EditorDoc, coalesce: string | null = null, windowMs = 1000) {
    const now = Date.now();
    if (coalesce !== null && coalesce === this.lastKey && now - this.lastAt < windowMs) { this.lastAt = now; return; }
    this.lastKey = coalesce;
    this.lastAt = now;
    this.past.push(strip(doc));
    if (this.past.length > LIMIT) this.past.shift();
    this.future = [];
  }

  undo(current: EditorDoc): EditorDoc | null {
    const prev = this.past.pop();
    if (!prev) return null;
    this.future.push(strip(current));
    this.lastKey = null;
    return prev;
  }

  redo(current: EditorDoc): EditorDoc | null {
    const next = this.future.pop();
    if (!next) return null;
    this.past.push(strip(current));
    this.lastKey = null;
    return next;
  }
}

/** A snapshot without run statuses or problems (those are not part of the document). */
function strip(doc: EditorDoc): EditorDoc {
  return {
    template: doc.template,
    nodes: doc.nodes.map((n) => ({ ...n, data: { dsl: n.data.dsl, info: n.data.info } })),
    edges: doc.edges.map((e) => ({ ...e, label: undefined, className: undefined })),
  };
}
