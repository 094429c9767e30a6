// A Node.js service using the AI Job Engine: create, watch, read, cancel, list, and read an
// error's google.rpc.ErrorInfo — with @grpc/grpc-js and @grpc/proto-loader and nothing else of
// ours. Run against a scheduler:
//
//   AIJOB_SCHEDULER_ADDR=127.0.0.1:50051 AIJOB_SERVICE_TOKEN=... AIJOB_USER_ID=u-1 node client.js
//
// It prints one JSON line summing up what it saw (tests/e2e/test_node_client.py reads it).
"use strict";

const path = require("node:path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");
const protobuf = require("protobufjs");

const ROOT = path.resolve(__dirname, "..", "..");

// The proto-loader options that work with this contract:
const definition = protoLoader.loadSync("aijob/v1/job_service.proto", {
  // google/rpc/status.proto is vendored beside the contract's own protos.
  includeDirs: [path.join(ROOT, "protos"), path.join(ROOT, "third_party")],
  keepCase: true, // field names as in the .proto (job_id, snapshot_json), as grpcurl prints them
  longs: String, // int64 counts and costs arrive as decimal strings: nothing rounded
  enums: String,
  defaults: true, // unset fields read as their defaults (0, ""), as in every other language
  oneofs: true,
});
const aijob = grpc.loadPackageDefinition(definition).aijob.v1;

const address = process.env.AIJOB_SCHEDULER_ADDR || "127.0.0.1:50051";
const token = process.env.AIJOB_SERVICE_TOKEN;
const user = process.env.AIJOB_USER_ID || "node-user";
// Text of the job this example cancels (a long generation in real life).
const longText = process.env.AIJOB_EXAMPLE_LONG_TEXT || "Write a long essay.";

const client = new aijob.JobService(address, grpc.credentials.createInsecure(), {
  // Keepalive the server accepts on idle streams (every 5 s or more; README, Security).
  "grpc.keepalive_time_ms": 10000,
  "grpc.keepalive_permit_without_calls": 1,
});

function metadata() {
  const m = new grpc.Metadata();
  m.set("authorization", `Bearer ${token}`);
  m.set("x-user-id", user); // the user every JobService call acts for
  return m;
}

function call(method, request) {
  return new Promise((resolve, reject) => {
    const deadline = new Date(Date.now() + 30000);
    client[method](request, metadata(), { deadline }, (error, reply) =>
      error ? reject(error) : resolve(reply),
    );
  });
}

function watch(jobId) {
  return new Promise((resolve, reject) => {
    const seen = [];
    const stream = client.WatchJob({ job_id: jobId }, metadata());
    stream.on("data", (job) => seen.push(job));
    stream.on("error", reject);
    stream.on("end", () => resolve(seen));
  });
}

// google.rpc.Status and ErrorInfo, as protobufjs types (Any declared locally: same wire form).
const rpc = protobuf.parse(`
  syntax = "proto3";
  package google.rpc;
  message Any { string type_url = 1; bytes value = 2; }
  message Status { int32 code = 1; string message = 2; repeated Any details = 3; }
  message ErrorInfo { string reason = 1; string domain = 2; map<string, string> metadata = 3; }
`, { keepCase: true }).root;

function errorInfo(error) {
  const raw = error.metadata && error.metadata.get("grpc-status-details-bin")[0];
  if (!raw) return null;
  const status = rpc.lookupType("google.rpc.Status").decode(raw);
  const detail = status.details.find((d) => d.type_url.endsWith("/google.rpc.ErrorInfo"));
  if (!detail) return null;
  const ErrorInfo = rpc.lookupType("google.rpc.ErrorInfo");
  return ErrorInfo.toObject(ErrorInfo.decode(detail.value));
}

function toDate(timestamp) {
  // Timestamps come as { seconds: "<int64 as string>", nanos }.
  return new Date(Number(timestamp.seconds) * 1000 + Math.floor(timestamp.nanos / 1e6));
}

async function main() {
  const summary = {};
  // Snapshot and params as JSON strings: no Struct converter to write.
  const created = await call("CreateJob", {
    job_type: "synthetic_echo",
    snapshot_json: JSON.stringify({ text: "hello from node" }),
    idempotency_key: `node-example-${process.pid}-${Date.now()}`,
  });
  summary.job_id = created.job.job_id;
  const states = await watch(created.job.job_id);
  summary.watched = states.map((job) => job.lifecycle_status);
  const job = await call("GetJob", { job_id: created.job.job_id });
  summary.final = job.lifecycle_status;
  summary.output = JSON.parse(job.result.output_json);
  summary.created_at = toDate(job.created_at).toISOString();

  const long = await call("CreateJob", {
    job_type: "synthetic_echo",
    snapshot_json: JSON.stringify({ text: longText }),
  });
  const cancel = await call("CancelJob", { job_id: long.job.job_id });
  summary.cancel_outcome = cancel.outcome; // "cancelled" (was queued) or "cancel_requested"
  const ended = await watch(long.job.job_id);
  summary.cancel_final = ended[ended.length - 1].lifecycle_status;

  try {
    await call("GetJob", { job_id: "0".repeat(26) });
  } catch (error) {
    summary.error = { code: grpc.status[error.code], info: errorInfo(error) };
  }

  const listed = await call("ListJobs", { page_size: 10 });
  summary.listed = listed.jobs.map((j) => j.job_id);
  console.log(JSON.stringify(summary));
  client.close();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
