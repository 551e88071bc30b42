const fs = require('fs');
const path = require('path');
const src = path.join(__dirname, '..', 'rules');
const out = path.join(__dirname, '..', 'dist', 'rules.json');
fs.mkdirSync(path.dirname(out), { recursive: true });
const rules = fs.readdirSync(src).map((f) => JSON.parse(fs.readFileSync(path.join(src, f), 'utf8')));
fs.writeFileSync(out, JSON.stringify(rules, null, 2));
console.log(`built ${rules.length} rules`);
