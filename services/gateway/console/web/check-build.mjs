// `npm run check-build`: build the console from this source into a scratch folder and compare it
// byte for byte with the committed ../dist. Exit 1, naming the files, when they differ: the
// committed build is what `pip install` ships, so it must be what this source builds.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

const committed = new URL('../dist/', import.meta.url).pathname;
const scratch = mkdtempSync(join(tmpdir(), 'agentix-console-'));

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

try {
  execFileSync(process.execPath, [new URL('node_modules/vite/bin/vite.js', import.meta.url).pathname, 'build', '--logLevel', 'warn'], {
    stdio: 'inherit', env: { ...process.env, CONSOLE_OUT_DIR: scratch },
  });
  const built = new Map(files(scratch).map((p) => [relative(scratch, p), readFileSync(p)]));
  const kept = new Map(files(committed).map((p) => [relative(committed, p), readFileSync(p)]));
  const differ = [...new Set([...built.keys(), ...kept.keys()])].sort()
    .filter((name) => !built.has(name) || !kept.has(name) || !built.get(name).equals(kept.get(name)));
  if (differ.length) {
    console.error(`The committed console build (services/gateway/console/dist) differs from what the source builds: ${differ.join(', ')}.`);
    console.error('Rebuild it: cd services/gateway/console/web && npm ci && npm run build; then commit dist/.');
    process.exit(1);
  }
  console.log(`console build check: ${built.size} files identical to the committed build`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
