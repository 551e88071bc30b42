'use strict';
const fs = require('fs');
const { endpoint } = require('./endpoint');

async function createIssue(title, teamId) {
  const res = await fetch(endpoint(), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: process.env.LINEAR_API_KEY },
    body: JSON.stringify({
      query: 'mutation($t:String!,$team:String!){issueCreate(input:{title:$t,teamId:$team}){issue{identifier}}}',
      variables: { t: title, team: teamId },
    }),
  });
  const json = await res.json();
  return json.data.issueCreate.issue.identifier;
}

(async () => {
  const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n');
  for (const l of lines.filter((x) => x.startsWith('- [ ] '))) {
    console.log(await createIssue(l.slice(6), process.env.LINEAR_TEAM));
  }
})();
