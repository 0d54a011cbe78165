// Build the console into app/console/static/: one script, one style sheet, their gzip
// copies (served to browsers that accept gzip) and the licences of what the bundle holds.
import { build } from 'esbuild';
import { readFileSync, readdirSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const out = new URL('../app/console/static/', import.meta.url).pathname;
const result = await build({
  entryPoints: ['src/main.js'],
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2020',
  outfile: join(out, 'console.js'),
  legalComments: 'none',
  metafile: true,
  logLevel: 'info',
});

for (const name of ['console.js', 'console.css']) {
  const path = join(out, name);
  writeFileSync(`${path}.gz`, gzipSync(readFileSync(path), { level: 9 }));
}

// Licences of every package whose code went into the bundle.
const packages = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const match = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
  if (match) packages.add(match[1]);
}
const parts = ['Third-party code bundled into console.js (built from web/ by `make console`).\n'];
for (const name of [...packages].sort()) {
  const dir = join('node_modules', name);
  const meta = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const file = readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  parts.push(`${'='.repeat(78)}\n${name} ${meta.version} (${meta.license})\n${'='.repeat(78)}\n`);
  parts.push(file && existsSync(join(dir, file)) ? readFileSync(join(dir, file), 'utf8') : `License: ${meta.license}\n`);
}
writeFileSync(join(out, 'LICENSES.txt'), parts.join('\n'));
