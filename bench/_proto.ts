import { killChildren } from './child.js'
import { runLoad } from './load.js'
import { openBenchCluster } from './postgres.js'
import { createAccounts, createMerchant, createPayments } from './setup.js'
import { spawnTarget } from './target.js'

const cluster = await openBenchCluster()
try {
  const url = await cluster.createDatabase('caipay_bench')
  const acc = await createAccounts(url)
  let server = await spawnTarget('server', { databaseUrl: url })
  const merchantId = await createMerchant(server.url, acc.apiKey, 'Bench Shop')
  const ids = await createPayments(server.url, acc.apiKey, merchantId, 500)
  await server.stop()
  const conns = Number(process.env.C ?? 16)
  const dur = Number(process.env.D ?? 5)
  const ceiling = await spawnTarget('ceiling', {
    databaseUrl: url,
    ...(process.env.PROF ? { cpuProfDir: '/tmp/benchproto/c' } : {}),
  })
  const headers = { 'api-key': acc.apiKey, 'merchant-id': merchantId }
  const json = await runLoad({
    url: ceiling.url,
    method: 'GET',
    paths: ['/json'],
    headers,
    connections: conns,
    durationS: dur,
    warmupS: 2,
  })
  console.log('json', json)
  const sel = await runLoad({
    url: ceiling.url,
    method: 'GET',
    paths: ids.map((i) => `/select/${i}`),
    headers,
    connections: conns,
    durationS: dur,
    warmupS: 2,
  })
  console.log('select', sel)
  await ceiling.stop()
  server = await spawnTarget('server', {
    databaseUrl: url,
    ...(process.env.PROF ? { cpuProfDir: '/tmp/benchproto' } : {}),
  })
  const st = await runLoad({
    url: server.url,
    method: 'GET',
    paths: ids.map((i) => `/v1/payments/${i}/status`),
    headers,
    connections: conns,
    durationS: dur,
    warmupS: 2,
  })
  console.log('status', st)
  const cr = await runLoad({
    url: server.url,
    method: 'POST',
    paths: ['/v1/payments'],
    headers,
    body: JSON.stringify({ referenceId: 'bench', amount: { unit: 'iso4217/USD', value: '1250' } }),
    connections: conns,
    durationS: dur,
    warmupS: 2,
  })
  console.log('create', cr)
  await server.stop()
} finally {
  killChildren()
  await cluster.close()
}
