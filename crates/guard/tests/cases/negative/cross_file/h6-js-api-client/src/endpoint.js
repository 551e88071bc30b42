'use strict';
const HOST = 'api.linear.app';

function endpoint() {
  return ['https:/', HOST, 'graphql'].join('/');
}

module.exports = { endpoint };
