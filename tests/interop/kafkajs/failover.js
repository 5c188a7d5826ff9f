// kafkajs 2 failover client for tests/interop/replication_test.py --client kafkajs (the harness
// kill -9s partition leaders meanwhile and checks the history with jepsen_checker.py).
//
//   node failover.js --bootstrap H:P[,H:P...] --topic T --partitions N [--rate 50]
//                    [--duration-ms 120000] [--control stdin|none] [--read-timeout-ms 40000]
//
// One idempotent producer per partition (`idempotent: true`, acks -1, maxInFlightRequests 1 as
// kafkajs requires for it, the client's own retries with a bounded count), each sending one
// numbered value at a time to its partition at --rate records/s: `kjs<p>-<seq>`, and after a send
// that failed for good (retries exhausted) `kjs<p>r<gen>-<seq>` from a new producer (a new producer
// id: kafkajs rolls its sequence back after a failed send, so reusing the producer could make the
// broker take the next value for a duplicate of the failed one). Every outcome is printed to stdout
// as one JSON line:
//   {"ack": {"value", "partition", "offset"}}   acknowledged
//   {"failed": {"value", "error"}}              the send failed after kafkajs's own retries
//   {"stopped": {"sent", "acked", "failed", "unknown", "errors", "fatal"}}   producers stopped
//   {"read": {"partition", "start", "end", "complete", "records": [[offset, value]]}}
//   {"read_done": {"records", "seconds", "error"}}
// With --control stdin the producers run until a `stop` line (or --duration-ms), then the script
// waits for a `read` line (the harness heals the cluster in between) and reads every partition from
// its low to its high watermark with a consumer group (fromBeginning), then exits. stdin closing
// stops everything. With --control none it produces for --duration-ms, then reads at once.
// kafkajs's own log (WARN and up) goes to stderr. Every wait is bounded.
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

function arg(name, fallback) {
  const i = process.argv.indexOf(name)
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback
}

const brokers = arg('--bootstrap', '127.0.0.1:9092').split(',')
const topic = arg('--topic', 'jepsen')
const partitions = Number(arg('--partitions', '3'))
const rate = Number(arg('--rate', '50'))
const durationMs = Number(arg('--duration-ms', '120000'))
const control = arg('--control', 'stdin')
const readTimeoutMs = Number(arg('--read-timeout-ms', '40000'))
// How long stopping may wait for a send in flight (its retries included).
const STOP_WAIT_MS = 70000
const START_MS = Date.now()

const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const errName = (e) => (e && (e.type || e.name)) || String(e)

// kafkajs's log lines go to stderr (the harness keeps them in a file); the error-level ones, one
// per failed attempt that kafkajs retries, are also counted by message.
const errors = {}
const logCreator = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log
  if (level === logLevel.ERROR) {
    const key = `${namespace}: ${String(message).slice(0, 80)}`
    errors[key] = (errors[key] || 0) + 1
  }
  process.stderr.write(`${new Date().toISOString()} ${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
}

const kafka = new Kafka({
  clientId: 'kafkajs-failover',
  brokers,
  logLevel: logLevel.WARN,
  logCreator,
  connectionTimeout: 3000,
  requestTimeout: 10000,
  retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 1000 },
})

let stopping = false
const counts = { sent: 0, acked: 0, failed: 0, unknown: 0 }
const fatal = []
const inflight = new Set() // values whose send has not ended

function newProducer() {
  return kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    // Bounded (kafkajs warns that a limit may invalidate EoS: it is why a producer whose send
    // failed for good is replaced by a new one).
    retry: { retries: 60, initialRetryTime: 100, maxRetryTime: 1000 },
  })
}

// One partition's loop: sequential sends, paced to `rate`.
async function partitionLoop(p) {
  let gen = 0
  let seq = 0
  let producer = null
  let nextT = Date.now()
  while (!stopping && Date.now() - START_MS < durationMs) {
    if (producer === null) {
      const candidate = newProducer()
      try {
        await candidate.connect()
        producer = candidate
      } catch (e) {
        errors[`connect: ${errName(e)}`] = (errors[`connect: ${errName(e)}`] || 0) + 1
        await candidate.disconnect().catch(() => {})
        await sleep(200)
        continue
      }
    }
    const now = Date.now()
    if (now < nextT) {
      await sleep(Math.min(nextT - now, 50))
      continue
    }
    nextT = Math.max(nextT + 1000 / rate, now - 1000) // no catch-up burst after a stall
    const name = gen === 0 ? `kjs${p}` : `kjs${p}r${gen}`
    const value = `${name}-${String(seq).padStart(6, '0')}`
    seq += 1
    counts.sent += 1
    inflight.add(value)
    try {
      const res = await producer.send({ topic, acks: -1, timeout: 10000, messages: [{ value, partition: p }] })
      const r = res.find((x) => x.partition === p) || res[0]
      counts.acked += 1
      inflight.delete(value)
      out({ ack: { value, partition: r.partition, offset: Number(r.baseOffset) } })
    } catch (e) {
      counts.failed += 1
      out({ failed: { value, error: `${errName(e)}: ${e.message}`.slice(0, 200) } })
      inflight.delete(value)
      // A failed send leaves its outcome unknown and kafkajs's sequence rolled back: go on with a
      // new producer (a new producer id), as the values do (`r<gen>`).
      await producer.disconnect().catch(() => {})
      producer = null
      gen += 1
      seq = 0
    }
  }
  if (producer !== null) await producer.disconnect().catch(() => {})
}

function bounded(promise, ms, what) {
  let timer
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms)
  })
  return Promise.race([promise, t]).finally(() => clearTimeout(timer))
}

// Every partition from its low to its high watermark, by a consumer group reading from the start.
async function readAll() {
  const t0 = Date.now()
  const admin = kafka.admin()
  const consumer = kafka.consumer({ groupId: `kafkajs-failover-read-${process.pid}-${t0}`, maxWaitTimeInMs: 200 })
  const parts = {}
  let total = 0
  let error = null
  try {
    await bounded(admin.connect(), readTimeoutMs, 'admin connect')
    const offs = await bounded(admin.fetchTopicOffsets(topic), readTimeoutMs, 'fetchTopicOffsets')
    for (const o of offs) {
      parts[o.partition] = { start: Number(o.low), end: Number(o.high), next: Number(o.low), records: [] }
    }
    const allDone = () => Object.values(parts).every((pr) => pr.next >= pr.end)
    if (!allDone()) {
      await bounded(consumer.connect(), readTimeoutMs, 'consumer connect')
      await bounded(consumer.subscribe({ topics: [topic], fromBeginning: true }), readTimeoutMs, 'subscribe')
      let finish
      const finished = new Promise((resolve) => {
        finish = resolve
      })
      await consumer.run({
        eachMessage: async ({ partition, message }) => {
          const pr = parts[partition]
          const o = Number(message.offset)
          if (!pr) return
          pr.records.push([o, message.value.toString()])
          pr.next = Math.max(pr.next, o + 1)
          if (allDone()) finish()
        },
      })
      const left = Math.max(1000, readTimeoutMs - (Date.now() - t0))
      await bounded(finished, left, 'reading to the high watermarks').catch((e) => {
        error = e.message
      })
    }
  } catch (e) {
    error = `${errName(e)}: ${e.message}`
  } finally {
    await consumer.disconnect().catch(() => {})
    await admin.disconnect().catch(() => {})
  }
  for (const [p, pr] of Object.entries(parts)) {
    total += pr.records.length
    out({ read: { partition: Number(p), start: pr.start, end: pr.end, complete: pr.next >= pr.end, records: pr.records } })
  }
  out({ read_done: { records: total, seconds: (Date.now() - t0) / 1000, error } })
}

async function main() {
  let readRequested = null
  const readNow = new Promise((resolve) => {
    readRequested = resolve
  })
  if (control === 'stdin') {
    const rl = readline.createInterface({ input: process.stdin })
    rl.on('line', (line) => {
      if (line.trim() === 'stop') stopping = true
      if (line.trim() === 'read') readRequested(true)
    })
    rl.on('close', () => {
      stopping = true
      readRequested(false)
    })
  }
  const loops = []
  for (let p = 0; p < partitions; p++) loops.push(partitionLoop(p))
  const all = Promise.all(loops)
  await bounded(all, durationMs + STOP_WAIT_MS, 'producers').catch((e) => fatal.push(e.message))
  // Values sent whose send has not ended (only if a loop outlived its bound).
  counts.unknown = inflight.size
  out({ stopped: { ...counts, unknown_values: [...inflight], errors, fatal, seconds: (Date.now() - START_MS) / 1000 } })
  let doRead = true
  if (control === 'stdin') {
    doRead = await bounded(readNow, 300000, 'waiting for `read`').catch(() => false)
  }
  if (doRead) await readAll()
}

main()
  .catch((e) => {
    out({ fatal: `${errName(e)}: ${e.message}` })
    process.exitCode = 1
  })
  .finally(() => setTimeout(() => process.exit(), 100))
