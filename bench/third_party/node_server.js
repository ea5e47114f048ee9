// A small Node.js HTTP service for docs/third-party.md: each request builds a JSON order
// summary (on-CPU work in handleRequest) and every 20th appends to an audit log and flushes
// it with fsyncSync (a synchronous wait inside the handler, the classic Node tail).
//   node --perf-basic-prof --interpreted-frames-native-stack node_server.js PORT LOGFILE
'use strict';
const http = require('http');
const fs = require('fs');

const port = Number(process.argv[2] || 18500);
const log = fs.openSync(process.argv[3] || '/tmp/node_server_audit.log', 'a');
let served = 0;

function summarize(n) {
  const items = [];
  for (let i = 0; i < n; i++) items.push({ sku: 'sku-' + (i * 7919 % 1000), qty: i % 5 + 1 });
  let total = 0;
  for (const it of items) total += it.qty * 3;
  return JSON.stringify({ items: items.length, total });
}

function auditFlush(line) {
  fs.writeSync(log, line);
  fs.fsyncSync(log);
}

function handleRequest(req, res) {
  const body = summarize(200);
  if (++served % 20 === 0) auditFlush(`${Date.now()} ${req.url} ${body.length}\n`);
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(body);
}

http.createServer(handleRequest).listen(port, '127.0.0.1', () => {
  console.log(`node_server: pid ${process.pid} port ${port}`);
});
