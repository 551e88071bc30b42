const { execSync } = require('child_process');
const commands = require('./commands');

const which = process.argv[2] || 'build';
execSync(commands[which] || commands.build, { stdio: 'inherit' });
execSync(commands.lint, { stdio: 'inherit' });
