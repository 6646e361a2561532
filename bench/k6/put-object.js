// k6 version of `sluice bench put-object`. See lib.js for BASE_URL, DB, PROTOCOL, VUS, DURATION.
import { options as opts, prepare, op } from './lib.js';

const DB = __ENV.DB || 'bench-put-object';
export const options = opts({ vus: 500, duration: '30s' });

export function setup() {
  prepare('put-object', DB, [['CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON)']]);
}

export default function () {
  op(DB, 'INSERT INTO t (json) VALUES (?)', ['{"age":10, "name":"yamada", "class":"A"}'], 'POST /rpc/put-object');
}
