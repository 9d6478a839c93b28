// Layered DAG layout (a small Sugiyama): longest-path layers, dummy points for long edges,
// barycenter ordering sweeps, then each layer nudged toward its neighbours. Left to right, so a
// pipeline reads like a sentence; the SVG scales to its box.

export const NODE_W = 156;
export const NODE_H = 50;
const GAP_X = 70;
const GAP_Y = 26;
const DUMMY_H = 14;
const PAD = 16;

/** Pure layout: {nodes: Map(id → {x, y, w, h, layer}), edges: [{source, target, handle, points}], width, height}. */
export function layoutDag(nodes, edges) {
  const ids = nodes.map((n) => n.id);
  const known = new Set(ids);
  const good = edges.filter((e) => known.has(e.source) && known.has(e.target) && e.source !== e.target);
  const succ = new Map(ids.map((id) => [id, []]));
  const indeg = new Map(ids.map((id) => [id, 0]));
  for (const e of good) {
    succ.get(e.source).push(e.target);
    indeg.set(e.target, indeg.get(e.target) + 1);
  }

  // 1. Longest-path layering in topological order (Kahn). Anything left over (a cycle, which
  //    validation forbids) goes after the rest rather than breaking the picture.
  const layer = new Map();
  const queue = ids.filter((id) => indeg.get(id) === 0);
  const order = [];
  const remaining = new Map(indeg);
  while (queue.length) {
    const id = queue.shift();
    order.push(id);
    if (!layer.has(id)) layer.set(id, 0);
    for (const t of succ.get(id)) {
      layer.set(t, Math.max(layer.get(t) ?? 0, layer.get(id) + 1));
      remaining.set(t, remaining.get(t) - 1);
      if (remaining.get(t) === 0) queue.push(t);
    }
  }
  let maxLayer = Math.max(0, ...layer.values());
  for (const id of ids) {
    if (!order.includes(id)) {
      maxLayer += 1;
      layer.set(id, maxLayer);
      order.push(id);
    }
  }

  // 2. Long edges become chains through dummy points, one per crossed layer.
  const vertices = new Map(order.map((id) => [id, { id, layer: layer.get(id), dummy: false, up: [], down: [] }]));
  const routed = [];
  let dummyCount = 0;
  for (const e of good) {
    let from = e.source;
    const chain = [];
    const ls = layer.get(e.source);
    const lt = layer.get(e.target);
    if (lt <= ls) continue; // only possible inside a cycle
    for (let l = ls + 1; l < lt; l += 1) {
      const id = `\u0000d${dummyCount++}`;
      vertices.set(id, { id, layer: l, dummy: true, up: [], down: [] });
      link(vertices, from, id);
      chain.push(id);
      from = id;
    }
    link(vertices, from, e.target);
    routed.push({ source: e.source, target: e.target, handle: e.sourceHandle || null, chain });
  }

  // 3. Ordering: barycenter sweeps down and up.
  const layers = [];
  for (const v of vertices.values()) (layers[v.layer] ||= []).push(v.id);
  const pos = new Map();
  const index = () => layers.forEach((ls) => ls.forEach((id, i) => pos.set(id, i)));
  index();
  for (let sweep = 0; sweep < 6; sweep += 1) {
    const down = sweep % 2 === 0;
    const range = down ? layers.map((_, i) => i).slice(1) : layers.map((_, i) => i).reverse().slice(1);
    for (const l of range) {
      const key = new Map(layers[l].map((id) => {
        const nb = down ? vertices.get(id).up : vertices.get(id).down;
        return [id, nb.length ? nb.reduce((s, n) => s + pos.get(n), 0) / nb.length : pos.get(id)];
      }));
      layers[l].sort((a, b) => key.get(a) - key.get(b) || pos.get(a) - pos.get(b));
      layers[l].forEach((id, i) => pos.set(id, i));
    }
  }

  // 4. Coordinates: stack each layer, then pull nodes toward the mean of their neighbours while
  //    keeping order and spacing.
  const height = (id) => (vertices.get(id).dummy ? DUMMY_H : NODE_H);
  const y = new Map();
  for (const ls of layers) {
    let acc = 0;
    for (const id of ls) { y.set(id, acc); acc += height(id) + GAP_Y; }
  }
  for (let pass = 0; pass < 4; pass += 1) {
    for (const ls of (pass % 2 ? [...layers].reverse() : layers)) {
      const want = ls.map((id) => {
        const v = vertices.get(id);
        const nb = [...v.up, ...v.down];
        if (!nb.length) return y.get(id);
        return nb.reduce((s, n) => s + y.get(n) + height(n) / 2, 0) / nb.length - height(id) / 2;
      });
      const placed = [];
      ls.forEach((id, i) => {
        const min = i ? placed[i - 1] + height(ls[i - 1]) + GAP_Y : -Infinity;
        placed.push(Math.max(want[i], min));
      });
      // Shift the whole layer so it sits, on average, where its nodes want to be.
      const shift = want.reduce((s, w, i) => s + (w - placed[i]), 0) / ls.length;
      ls.forEach((id, i) => y.set(id, placed[i] + shift));
    }
  }
  const minY = Math.min(...y.values());
  const out = new Map();
  let maxY = 0;
  for (const v of vertices.values()) {
    const top = y.get(v.id) - minY + PAD;
    const x = PAD + v.layer * (NODE_W + GAP_X);
    maxY = Math.max(maxY, top + height(v.id));
    out.set(v.id, { x, y: top, w: v.dummy ? 0 : NODE_W, h: height(v.id), layer: v.layer, dummy: v.dummy });
  }
  const edgesOut = routed.map((r) => {
    const s = out.get(r.source);
    const t = out.get(r.target);
    const points = [[s.x + s.w, s.y + s.h / 2]];
    for (const d of r.chain) { const p = out.get(d); points.push([p.x + NODE_W / 2, p.y + p.h / 2]); }
    points.push([t.x, t.y + t.h / 2]);
    return { source: r.source, target: r.target, handle: r.handle, points };
  });
  for (const id of [...out.keys()]) if (out.get(id).dummy) out.delete(id);
  return {
    nodes: out,
    edges: edgesOut,
    width: PAD * 2 + (Math.max(0, ...[...out.values()].map((n) => n.layer)) + 1) * (NODE_W + GAP_X) - GAP_X,
    height: maxY + PAD,
  };
}

// Vertical distance between two stacked edge labels: more than the 11px label's line box.
export const LABEL_STEP = 16;

/**
 * Where the handle labels of a node's outgoing edges go (`true`/`false` of a branch, a router's
 * routes). All of a node's edges leave from one port, so labels drawn at the port overlap
 * ("tfrue"): instead there is one label per handle, even when several edges share it, stacked
 * in a column just right of the port, ordered like the edges they name (top to bottom),
 * LABEL_STEP apart; a lone label sits just above its edge. Pure: [{source, handle, x, y}],
 * where (x, y) is the left end and vertical centre of the text.
 */
export function edgeLabels(edges) {
  const bySource = new Map();
  for (const e of edges) {
    if (!e.handle) continue;
    const handles = bySource.get(e.source) || new Map();
    bySource.set(e.source, handles);
    const aim = e.points[Math.min(1, e.points.length - 1)][1]; // where the edge heads first
    const group = handles.get(e.handle) || { handle: e.handle, port: e.points[0], aims: [] };
    group.aims.push(aim);
    handles.set(e.handle, group);
  }
  const out = [];
  for (const [source, handles] of bySource) {
    const mean = (g) => g.aims.reduce((a, b) => a + b, 0) / g.aims.length;
    const groups = [...handles.values()].sort((a, b) => mean(a) - mean(b) || a.handle.localeCompare(b.handle));
    const [x, y] = groups[0].port;
    groups.forEach((g, i) => {
      const offset = groups.length === 1 ? -LABEL_STEP / 2 : (i - (groups.length - 1) / 2) * LABEL_STEP;
      out.push({ source, handle: g.handle, x: x + 8, y: y + offset });
    });
  }
  return out;
}

function link(vertices, a, b) {
  vertices.get(a).down.push(b);
  vertices.get(b).up.push(a);
}

/** Smooth path through points with horizontal tangents (reads well left to right). */
export function pathThrough(points) {
  let d = `M${points[0][0]},${points[0][1]}`;
  for (let i = 1; i < points.length; i += 1) {
    const [x0, y0] = points[i - 1];
    const [x1, y1] = points[i];
    const mx = (x1 - x0) / 2;
    d += ` C${x0 + mx},${y0} ${x1 - mx},${y1} ${x1},${y1}`;
  }
  return d;
}

const SVG = 'http://www.w3.org/2000/svg';
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

export const STATUS_MARK = {
  pending: '○', running: '◐', done: '✓', skipped: '⤼', failed: '✗', waiting: '‖', cancelled: '■',
};

const LABEL_CHARS = 9; // what fits in the gap between two columns at the label's size

function clip(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * Draw a DSL graph as SVG. Nodes are focusable buttons (Tab, Enter/Space select). Returns
 * {svg, setStatus(id, status), select(id)}.
 */
export function drawDag(dsl, { onSelect = () => {}, label = 'Workflow graph' } = {}) {
  const nodes = (dsl && Array.isArray(dsl.nodes)) ? dsl.nodes.filter((n) => n && typeof n.id === 'string') : [];
  const edges = (dsl && Array.isArray(dsl.edges)) ? dsl.edges.filter((e) => e && e.source && e.target) : [];
  // Without edges (the workflow is unknown) keep the nodes' order in a row, edges undrawn.
  const placing = edges.length || nodes.length < 2 ? edges : nodes.slice(1).map((n, i) => ({ source: nodes[i].id, target: n.id }));
  const lay = layoutDag(nodes, placing);
  if (!edges.length) lay.edges = [];
  const svg = s('svg', {
    class: 'dag', viewBox: `0 0 ${Math.max(lay.width, 200)} ${Math.max(lay.height, 80)}`, role: 'group',
    'aria-label': label, preserveAspectRatio: 'xMinYMin meet',
  });
  // Never blown up past natural size; a wide graph keeps a legible minimum and scrolls.
  svg.style.maxWidth = `${Math.max(lay.width, 200)}px`;
  svg.style.minWidth = `${Math.min(lay.width, 560)}px`;
  svg.append(s('defs', {}, s('marker', {
    id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse',
  }, s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }))));
  const edgeLayer = s('g', { class: 'edges' });
  for (const e of lay.edges) {
    const g = s('g', { class: 'edge', 'data-source': e.source, 'data-target': e.target });
    g.append(s('path', { d: pathThrough(e.points), 'marker-end': 'url(#arrow)' }));
    edgeLayer.append(g);
  }
  // Labels after every edge, so no line is drawn over a label.
  for (const l of edgeLabels(lay.edges)) {
    // Clipped so a long route name does not run into the next column of nodes.
    const shown = clip(l.handle, LABEL_CHARS);
    edgeLayer.append(s('text', {
      x: l.x, y: l.y, class: 'edge-label', 'dominant-baseline': 'central', 'data-source': l.source, 'data-handle': l.handle,
    }, shown, ...(shown === l.handle ? [] : [s('title', {}, l.handle)])));
  }
  svg.append(edgeLayer);
  const els = new Map();
  for (const n of nodes) {
    const p = lay.nodes.get(n.id);
    if (!p) continue;
    const title = clip(n.label ? `${n.label}` : n.id, 20);
    const statusText = s('text', { x: p.x + NODE_W - 10, y: p.y + 20, class: 'node-mark', 'text-anchor': 'end' }, STATUS_MARK.pending);
    const g = s('g', {
      class: 'node status-pending', tabindex: 0, role: 'button', 'data-node-id': n.id, 'data-status': 'pending',
      'aria-label': `${n.id} (${n.kind}): pending`,
    },
    s('rect', { x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx: 8 }),
    s('text', { x: p.x + 10, y: p.y + 20, class: 'node-title' }, title),
    s('text', { x: p.x + 10, y: p.y + 38, class: 'node-kind' }, clip(n.label ? `${n.id} · ${n.kind}` : n.kind, 24)),
    statusText);
    const choose = () => onSelect(n.id);
    g.addEventListener('click', choose);
    g.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); choose(); }
    });
    els.set(n.id, { g, statusText, kind: n.kind });
    svg.append(g);
  }
  return {
    svg,
    setStatus(id, status) {
      const el = els.get(id);
      if (!el || el.g.dataset.status === status) return;
      el.g.classList.remove(`status-${el.g.dataset.status}`);
      el.g.classList.add(`status-${status}`);
      el.g.dataset.status = status;
      el.statusText.textContent = STATUS_MARK[status] || '•';
      el.g.setAttribute('aria-label', `${id} (${el.kind}): ${status}`);
    },
    select(id) {
      for (const [nid, el] of els) {
        el.g.classList.toggle('selected', nid === id);
        el.g.setAttribute('aria-pressed', nid === id ? 'true' : 'false');
      }
    },
  };
}
