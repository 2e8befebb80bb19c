import { type BenchCase, largeTable, log, notes, record, settings, smallRows, targets } from '../harness.js'
import { jsonClient } from '../http.js'
import { runProbe } from '../load.js'
import type { BenchCluster } from '../postgres.js'
import { explainEndpoints, populate, scaleEndpoints } from '../scale.js'
import { spawnTarget } from '../target.js'

async function scalePhase(cluster: BenchCluster): Promise<void> {
  const large = settings.scaleRows
  const n = (x: number) => x.toLocaleString('en')
  log(`scale    populating ${n(smallRows)} payments ...`)
  const small = await populate(await cluster.createDatabase('caipay_scale_small'), smallRows)
  const big = await largeTable(cluster)

  const plans = await explainEndpoints(big.url, scaleEndpoints(big))
  log(`scale    EXPLAIN (ANALYZE, BUFFERS) with ${n(large)} payments, SQL as the endpoints ran it:`)
  const seen = new Set<string>()
  let suspicious = 0
  for (const { endpoint, plans: list } of plans) {
    log(`  ${endpoint}`)
    for (const p of list) {
      if (p.suspicious) suspicious++
      log(
        `    ${p.suspicious ? '!! ' : ''}${p.nodes}; rows ${p.rows}` +
          (p.filtered ? `, ${p.filtered} filtered out` : '') +
          (p.sorted ? `, ${p.sorted} sorted` : '') +
          `; buffers hit ${p.sharedHit} read ${p.sharedRead}; ${p.executionMs.toFixed(3)} ms`,
      )
      if (!seen.has(p.sql)) log(`       ${p.sql}`)
      seen.add(p.sql)
    }
  }
  targets.push({
    what:
      'scale: every payments query of these endpoints reads in keyset order (no Seq Scan; at most 500 rows ' +
      'filtered out or sorted per page)',
    met: suspicious === 0,
    detail: `${suspicious} plan${suspicious === 1 ? '' : 's'} over that`,
  })

  const [smallServer, bigServer] = await Promise.all([
    spawnTarget('server', { databaseUrl: small.url }),
    spawnTarget('server', { databaseUrl: big.url }),
  ])
  let worst = 0
  try {
    log(
      `scale    latency, ${n(smallRows)} vs ${n(large)} payments (alternating requests, 2 connections, ` +
        `${settings.probe} requests each):`,
    )
    const smallEndpoints = scaleEndpoints(small)
    for (const [i, e] of scaleEndpoints(big).entries()) {
      const s = smallEndpoints[i]!
      // Same work on both sides: a list page must hold as many items in the small table as in the big one.
      const size = async (url: string, endpoint: typeof e) => {
        const client = jsonClient(url, endpoint.headers)
        const res = await client.request<{ data?: unknown[] }>('GET', endpoint.paths[0]!)
        client.close()
        if (res.status !== 200) throw new Error(`${endpoint.label}: ${res.status}`)
        return res.body.data?.length
      }
      const [smallSize, bigSize] = [await size(smallServer.url, s), await size(bigServer.url, e)]
      if (smallSize !== bigSize)
        throw new Error(`${e.label}: ${smallSize} items vs ${bigSize}: not comparable`)
      const [rs, rb] = await runProbe({
        targets: [
          { url: smallServer.url, paths: s.paths, headers: s.headers },
          { url: bigServer.url, paths: e.paths, headers: e.headers },
        ],
        concurrency: 2,
        requests: settings.probe,
        warmup: 50,
      })
      if (rs!.failures || rb!.failures) throw new Error(`${e.label}: requests failed`)
      log(
        `  ${e.label.padEnd(58)} p50 ${rs!.p50.toFixed(2)} -> ${rb!.p50.toFixed(2)} ms, ` +
          `p99 ${rs!.p99.toFixed(2)} -> ${rb!.p99.toFixed(2)} ms`,
      )
      record(`scale.${e.name}.p50`, rb!.p50, 'ms', rs!.p50)
      record(`scale.${e.name}.p99`, rb!.p99, 'ms', rs!.p99)
      worst = Math.max(worst, rb!.p50 / rs!.p50)
    }
  } finally {
    await Promise.all([smallServer.stop(), bigServer.stop()])
  }
  notes.push(
    `scale.*: latency of one request (2 connections) with ${n(large)} payments in the table; its ceiling is the same ` +
      `request with ${n(smallRows)} payments, measured alternately in the same run (ratio 1.0 = flat).`,
  )
  targets.push({
    what: `scale: p50 latency flat from ${n(smallRows)} to ${n(large)} payments (within 1.25x)`,
    met: worst <= 1.25,
    detail: `worst p50 ratio ${worst.toFixed(2)}`,
  })
}

export default { name: 'scale', order: 40, run: scalePhase } satisfies BenchCase
