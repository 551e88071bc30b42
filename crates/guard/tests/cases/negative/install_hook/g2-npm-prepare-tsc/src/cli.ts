import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

const files: string[] = process.argv.slice(2);
const root: string = execFileSync('git', ['rev-parse', '--show-toplevel']).toString().trim();
for (const f of files) {
  const text: string = readFileSync(f, 'utf8');
  const long = text.split('\n').filter((l) => l.length > 120).length;
  console.log(`${root}/${f}: ${long} long lines`);
}
