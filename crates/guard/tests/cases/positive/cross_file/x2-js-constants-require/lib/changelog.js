const { execFileSync } = require('child_process');
const { MAX_COMMITS } = require('./constants');

const log = execFileSync('git', ['log', '--oneline', `-n${MAX_COMMITS}`]).toString();
console.log(log.split('\n').map((l) => `- ${l}`).join('\n'));
