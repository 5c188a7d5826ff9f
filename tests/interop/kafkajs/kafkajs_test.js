// Interop check with kafkajs 2 (npm; `npm install` in this directory, .ci/run does it). Against a
// running broker it creates a topic, produces with the codecs kafkajs has built in (none, gzip),
// consumes everything back in a consumer group that commits, checks the committed offsets with
// admin.fetchOffsets, lists and describes topics and configs, and deletes the topic.
//
// Prints `PASS kafkajs: <what>` or `FAIL kafkajs: <what>: <why>` per check; exits 1 on any FAIL.
// Every wait is bounded by --timeout-ms.
'use strict'

const { Kafka, CompressionTypes, ConfigResourceTypes, logLevel } = require('kafkajs')

function arg(name, fallback) {
  const i = process.argv.indexOf(name)
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback
}

const bootstrap = arg('--bootstrap', '127.0.0.1:9092')
const prefix = arg('--prefix', 'kafkajs')
const timeoutMs = Number(arg('--timeout-ms', '30000'))
const PARTITIONS = 2
const PER_CODEC = 10
const CODECS = [
  ['none', CompressionTypes.None],
  ['gzip', CompressionTypes.GZIP],
]

let failed = false
const pass = (what) => console.log(`PASS kafkajs: ${what}`)
const fail = (what, err) => {
  failed = true
  console.log(`FAIL kafkajs: ${what}: ${err && err.message ? err.message : err}`)
}

// Runs one check; a thrown error (a refused request included) is a FAIL. Returns its value.
async function check(what, fn) {
  try {
    const v = await fn()
    pass(what)
    return v
  } catch (err) {
    fail(what, err)
    return undefined
  }
}

function bounded(promise, what) {
  let timer
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${timeoutMs} ms`)), timeoutMs)
  })
  return Promise.race([promise, t]).finally(() => clearTimeout(timer))
}

async function main() {
  const kafka = new Kafka({
    clientId: `${prefix}-client`,
    brokers: [bootstrap],
    logLevel: logLevel.ERROR,
    retry: { retries: 3 },
  })
  const topic = `${prefix}-${process.pid}-${Date.now()}`
  const group = `${topic}-group`
  const admin = kafka.admin()
  await check('admin connect', () => bounded(admin.connect(), 'admin connect'))

  await check(`createTopics ${topic} (${PARTITIONS} partitions)`, async () => {
    const created = await bounded(
      admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }], waitForLeaders: true }),
      'createTopics',
    )
    if (!created) throw new Error('createTopics answered false (topic already there?)')
  })

  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await check('producer connect', () => bounded(producer.connect(), 'producer connect'))
  const expected = new Set()
  for (const [name, codec] of CODECS) {
    const messages = []
    for (let i = 0; i < PER_CODEC; i++) {
      const value = `${name}-${i}`
      expected.add(value)
      messages.push({ key: `k${i}`, value, partition: i % PARTITIONS })
    }
    await check(`produce ${PER_CODEC} messages with ${name}`, async () => {
      const res = await bounded(producer.send({ topic, compression: codec, acks: -1, messages }), 'send')
      const bad = res.filter((r) => r.errorCode !== 0)
      if (bad.length) throw new Error(`error codes ${JSON.stringify(bad)}`)
    })
  }
  await producer.disconnect()

  // Consume everything back in a group; autoCommit commits what eachMessage processed.
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 1000 })
  const seen = new Set()
  await check('consumer group: consume every message back', async () => {
    await bounded(consumer.connect(), 'consumer connect')
    await bounded(consumer.subscribe({ topic, fromBeginning: true }), 'subscribe')
    const done = new Promise((resolve) => {
      consumer.run({
        autoCommitInterval: 100,
        eachMessage: async ({ message }) => {
          seen.add(message.value.toString())
          if (seen.size >= expected.size) resolve()
        },
      })
    })
    await bounded(done, `consume ${expected.size} messages (got ${seen.size})`)
    const missing = [...expected].filter((v) => !seen.has(v))
    if (missing.length) throw new Error(`missing ${missing.join(',')}`)
  })
  // disconnect stops the consumer, which commits the resolved offsets first.
  await check('consumer disconnect (final commit)', () => bounded(consumer.disconnect(), 'consumer disconnect'))

  await check('fetchOffsets: the group committed the end of every partition', async () => {
    const res = await bounded(admin.fetchOffsets({ groupId: group, topics: [topic] }), 'fetchOffsets')
    const parts = res.find((t) => t.topic === topic).partitions
    const total = parts.reduce((sum, p) => sum + Number(p.offset), 0)
    if (parts.length !== PARTITIONS || total !== expected.size) {
      throw new Error(`committed ${JSON.stringify(parts)}, want ${expected.size} in total`)
    }
  })

  await check('listTopics has the topic', async () => {
    const topics = await bounded(admin.listTopics(), 'listTopics')
    if (!topics.includes(topic)) throw new Error(`not in ${topics.join(',')}`)
  })
  await check('fetchTopicMetadata describes the partitions', async () => {
    const md = await bounded(admin.fetchTopicMetadata({ topics: [topic] }), 'fetchTopicMetadata')
    const t = md.topics.find((x) => x.name === topic)
    if (!t || t.partitions.length !== PARTITIONS) throw new Error(JSON.stringify(md))
  })
  await check('describeConfigs lists the topic configs', async () => {
    const res = await bounded(
      admin.describeConfigs({
        resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }],
        includeSynonyms: false,
      }),
      'describeConfigs',
    )
    const r = res.resources[0]
    if (r.errorCode !== 0) throw new Error(`error code ${r.errorCode}`)
    const names = r.configEntries.map((e) => e.configName)
    for (const want of ['cleanup.policy', 'retention.ms', 'compression.type']) {
      if (!names.includes(want)) throw new Error(`${want} missing in ${names.join(',')}`)
    }
  })
  await check('deleteTopics', async () => {
    await bounded(admin.deleteTopics({ topics: [topic], timeout: timeoutMs }), 'deleteTopics')
    const topics = await bounded(admin.listTopics(), 'listTopics')
    if (topics.includes(topic)) throw new Error('still listed after delete')
  })
  await admin.disconnect()
}

main()
  .catch((err) => fail('unexpected error', err))
  .finally(() => process.exit(failed ? 1 : 0))
