// Shared helpers for the k6 scripts: the same scenarios as `sluice bench`,
// against sluice's JSON API (PROTOCOL=json, default), Hrana (PROTOCOL=hrana)
// or the peer app's routes (PROTOCOL=peer).
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e DB=bench-put-object --vus 500 --duration 30s put-object.js
import http from 'k6/http';
import { check } from 'k6';

export const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';
export const PROTOCOL = __ENV.PROTOCOL || 'json';
const params = { headers: { 'Content-Type': 'application/json' } };
if (__ENV.TOKEN) params.headers.Authorization = `Bearer ${__ENV.TOKEN}`;

export function options(defaults) {
  return {
    vus: Number(__ENV.VUS || defaults.vus || 10),
    duration: __ENV.DURATION || defaults.duration || '30s',
    thresholds: { http_req_failed: ['rate<0.01'] },
  };
}

function hranaArgs(args) {
  return (args || []).map((v) => (typeof v === 'number'
    ? { type: 'integer', value: String(v) }
    : { type: 'text', value: String(v) }));
}

// sql runs one statement on database db and returns the response.
export function sql(db, stmt, args) {
  if (PROTOCOL === 'hrana') {
    const body = JSON.stringify({ requests: [
      { type: 'execute', stmt: { sql: stmt, args: hranaArgs(args) } }, { type: 'close' }] });
    return http.post(`${BASE_URL}/db/${db}/v2/pipeline`, body, params);
  }
  return http.post(`${BASE_URL}/v1/databases/${db}/query`, JSON.stringify({ sql: stmt, params: args || [] }), params);
}

// route calls one of the peer app's routes, e.g. "POST /rpc/put-object".
export function route(r) {
  const [method, path] = r.split(' ');
  return http.request(method, `${BASE_URL}${path}`, null, params);
}

// prepare creates the database and runs the schema statements (sluice), or
// asks the peer app to set the scenario up.
export function prepare(scenario, db, schema) {
  if (PROTOCOL === 'peer') {
    route(`POST /setup?scenario=${scenario}`);
    return;
  }
  http.put(`${BASE_URL}/v1/databases/${db}`, null, params);
  for (const stmt of schema) {
    const res = sql(db, stmt[0], stmt[1]);
    if (res.status !== 200) throw new Error(`schema: ${res.status} ${res.body}`);
  }
}

// op sends one scenario request and checks it succeeded.
export function op(db, stmt, args, peerRoute) {
  const res = PROTOCOL === 'peer' ? route(peerRoute) : sql(db, stmt, args);
  check(res, {
    'status 2xx': (r) => r.status >= 200 && r.status < 300,
    'no error inside': (r) => PROTOCOL !== 'hrana' || !String(r.body).includes('"type":"error"'),
  });
  return res;
}
