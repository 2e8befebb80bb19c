import { Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import { buildApp } from '../src/server/app.js'
import { resolveConfig } from '../src/server/config.js'
import { killChildren } from './child.js'
import { openBenchCluster } from './postgres.js'
import { createAccounts, createMerchant, createPayments } from './setup.js'
import { spawnTarget } from './target.js'

const cluster = await openBenchCluster()
try {
  const url = await cluster.createDatabase('caipay_bench')
  const acc = await createAccounts(url)
  const server = await spawnTarget('server', { databaseUrl: url })
  const merchantId = await createMerchant(server.url, acc.apiKey, 'Bench Shop')
  const ids = await createPayments(server.url, acc.apiKey, merchantId, 5)
  await server.stop()
  let cap: string[] | undefined
  const db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url }) }), log: (e) => { if (cap && e.level === 'query') cap.push(e.query.sql.slice(0, 140)) } })
  const app = await buildApp({ db, config: resolveConfig({ rateLimit: false }), logger: false })
  await app.ready()
  const headers = { 'api-key': acc.apiKey, 'merchant-id': merchantId }
  const body = { referenceId: 'b', amount: { unit: 'iso4217/USD', value: '1250' } }
  const reqs: [string, any][] = [
    ['status', { method: 'GET', url: `/v1/payments/${ids[0]}/status`, headers }],
    ['gstatus', { method: 'GET', url: `/v1/gateway/payment/${ids[0]}/status`, headers: { 'api-key': acc.walletKey } }],
    ['create', { method: 'POST', url: '/v1/payments', headers, payload: body }],
    ['createIdem', { method: 'POST', url: '/v1/payments', headers: { ...headers, 'idempotency-key': 'k1' }, payload: body }],
    ['options', { method: 'POST', url: `/v1/gateway/payment/${ids[1]}/options`, headers: { 'api-key': acc.walletKey }, payload: { accounts: ['eip155:8453:0x1111111111111111111111111111111111111111'] } }],
  ]
  for (const [name, r] of reqs) {
    cap = []
    const res = await app.inject(r)
    console.log(name, res.statusCode, cap.length); for (const q of cap) console.log('   ', q)
    if (name === 'options') {
      const optionId = res.json().options[0].id
      for (const [n2, r2] of [
        ['fetch', { method: 'POST', url: `/v1/gateway/payment/${ids[1]}/fetch`, headers: { 'api-key': acc.walletKey }, payload: { optionId, data: '' } }],
        ['confirm', { method: 'POST', url: `/v1/gateway/payment/${ids[1]}/confirm`, headers: { 'api-key': acc.walletKey, 'idempotency-key': 'c1' }, payload: { optionId, results: ['0x' + 'ab'.repeat(65)] } }],
      ] as [string, any][]) {
        cap = []
        const res2 = await app.inject(r2)
        console.log(n2, res2.statusCode, cap.length); for (const q of cap) console.log('   ', q)
      }
    }
  }
  cap = undefined
  await app.close(); await db.destroy()
} finally {
  killChildren()
  await cluster.close()
}
