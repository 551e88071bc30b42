#!/usr/bin/env node
// Resolve each service of the local cluster.
const dns = require('dns');

const DOMAIN = process.env.CLUSTER_DOMAIN || 'svc.cluster.local';
const SERVICES = ['api', 'worker', 'postgres', 'redis'];
const token = process.env.CLUSTER_API_TOKEN;

async function main() {
  for (const s of SERVICES) {
    const host = s + '.' + DOMAIN;
    try {
      const { address } = await dns.promises.lookup(host);
      console.log(`${s}: ${address}`);
    } catch (e) {
      console.log(`${s}: does not resolve (${e.code})`);
    }
  }
  if (!token) console.log('CLUSTER_API_TOKEN is not set; skipping the API check');
}

main();
