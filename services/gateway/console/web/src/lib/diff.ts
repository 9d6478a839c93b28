// Line diff of two prompt versions: common prefix/suffix trimmed, then a longest-common-
// subsequence table over the middle. Prompts are small; past MAX_CELLS the middle is shown as
// a plain replace rather than freezing the tab.

const MAX_CELLS = 4_000_000;

/** → [{op: ' ' | '-' | '+', text, a?, b?}] where a/b are 1-based line numbers. */
export interface DiffLine { op: ' ' | '-' | '+'; text: string; a?: number; b?: number }

export function diffLines(oldText: string | null | undefined, newText: string | null | undefined): DiffLine[] {
  const a = String(oldText ?? '').split('\n');
  const b = String(newText ?? '').split('\n');
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start += 1;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) { endA -= 1; endB -= 1; }

  const out: DiffLine[] = [];
  for (let i = 0; i < start; i += 1) out.push({ op: ' ', text: a[i], a: i + 1, b: i + 1 });
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  const n = midA.length;
  const m = midB.length;
  if ((n + 1) * (m + 1) > MAX_CELLS) {
    midA.forEach((t, i) => out.push({ op: '-', text: t, a: start + i + 1 }));
    midB.forEach((t, j) => out.push({ op: '+', text: t, b: start + j + 1 }));
  } else {
    // lcs[i][j] = LCS length of midA[i:] and midB[j:], flattened.
    const w = m + 1;
    const lcs = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i -= 1) {
      for (let j = m - 1; j >= 0; j -= 1) {
        lcs[i * w + j] = midA[i] === midB[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && midA[i] === midB[j]) {
        out.push({ op: ' ', text: midA[i], a: start + i + 1, b: start + j + 1 });
        i += 1; j += 1;
      } else if (i < n && (j === m || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1])) {
        out.push({ op: '-', text: midA[i], a: start + i + 1 });
        i += 1;
      } else {
        out.push({ op: '+', text: midB[j], b: start + j + 1 });
        j += 1;
      }
    }
  }
  const shift = endB - endA;
  for (let i = endA; i < a.length; i += 1) out.push({ op: ' ', text: a[i], a: i + 1, b: i + 1 + shift });
  return out;
}
