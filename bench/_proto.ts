import fs from 'node:fs'
import { killChildren } from './child.js'
import { runLoad } from './load.js'
import { openBenchCluster } from './postgres.js'
import { summariseProfile } from './profile.js'
import { createAccounts, createMerchant, createPayments } from './setup.js'
import { spawnTarget } from './target.js'

const cluster = await openBenchCluster()
try {
  const url = await cluster.createDatabase('caipay_bench')
  const acc = await createAccounts(url)
  let server = await spawnTarget('server', { databaseUrl: url })
  const merchantId = await createMerchant(server.url, acc.apiKey, 'Bench Shop')
  const ids = await createPayments(server.url, acc.apiKey, merchantId, 200)
  await server.stop()
  const headers = { 'api-key': acc.apiKey, 'merchant-id': merchantId }
  const conns = Number(process.env.C ?? 16)
  for (const [kind, paths] of [['ceiling', ids.map((i) => `/select/${i}`)], ['server', ids.map((i) => `/v1/payments/${i}/status`)]] as const) {
    const dir = `/tmp/benchproto/${kind}`
    fs.rmSync(dir, { recursive: true, force: true })
    const t = await spawnTarget(kind, { databaseUrl: url, cpuProfDir: dir })
    await runLoad({ url: t.url, method: 'GET', paths: [...paths], headers, connections: conns, durationS: 2 })
    const r = await runLoad({ url: t.url, method: 'GET', paths: [...paths], headers, connections: conns, durationS: 5 })
    await t.stop()
    const f = fs.readdirSync(dir).map((f) => `${dir}/${f}`).sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0]!
    const s = summariseProfile(f, 8)
    const total = r.requests * 7 / 5
    console.log(kind, r.rps.toFixed(0), 'rps; busy ms/req', (s.totalMs / total).toFixed(3), s.byFunction.slice(0, 6).map((x) => `${x.name.split(' ')[0]} ${(x.ms / total * 1000).toFixed(0)}us`).join(', '))
  }
} finally {
  killChildren()
  await cluster.close()
}
