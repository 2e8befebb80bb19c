import {
  type BenchCase,
  type CpuBreakdown,
  ceilingCpu,
  connections,
  fmt,
  largeTable,
  log,
  measure,
  mixedClients,
  notes,
  pct,
  record,
  round,
  rssBoundMb,
  type Scenario,
  settings,
  state,
  targets,
} from '../harness.js'
import { runLoad } from '../load.js'
import { runMixed } from '../mixed.js'
import type { BenchCluster } from '../postgres.js'
import { insertOpenPayments } from '../scale.js'
import { createMerchant } from '../setup.js'
import { spawnTarget } from '../target.js'

/**
 * The mixed workload on the big database (bench/mixed.ts: classes, and how CPU is split between them),
 * on the server as it ships; its resident memory sampled all along.
 */
async function mixedPhase(cluster: BenchCluster): Promise<void> {
  const big = await largeTable(cluster)
  const m = settings.mixed
  const n = (x: number) => x.toLocaleString('en')
  const server = await spawnTarget('cli', { databaseUrl: big.url })
  try {
    const shopId = await createMerchant(server.url, big.apiKey, 'Mixed Shop')
    // Enough payments for the flows at twice their rate alone (they share the machine in the mix, so go
    // slower), or 800/s if that is more: a quieter moment in the mix than in the flow phase stays covered.
    const seconds = 10 + m.warmupS + m.durationS + m.aloneWarmupS + m.aloneDurationS
    const flowIds = await insertOpenPayments(
      big.url,
      { partnerId: big.partnerId, merchantId: shopId },
      Math.ceil(Math.max(800, 2 * (state.isolatedFlowRate ?? 0)) * seconds),
    )
    log(
      `mixed    ${n(big.rows)} payments; ${n(mixedClients.wallets)} wallets polling, ${mixedClients.merchants} ` +
        `merchant clients, ${mixedClients.flows} paying wallets (${n(flowIds.length)} payments ready), ` +
        `${m.durationS} s after ${m.warmupS} s of warm-up ...`,
    )
    const names = { wallets: 'wallet_polls', merchants: 'merchants', flows: 'gateway_flow' } as const
    const outcome = await runMixed({
      url: server.url,
      serverPid: server.pid,
      postmasterPid: state.postmasterPid,
      classes: [
        {
          name: 'wallets',
          headers: { 'api-key': big.walletKey },
          ids: big.openIds,
          actors: mixedClients.wallets,
        },
        {
          name: 'merchants',
          headers: { 'api-key': big.apiKey, 'merchant-id': big.merchantIds[0]! },
          ids: big.sampleIds,
          actors: mixedClients.merchants,
        },
        { name: 'flows', headers: { 'api-key': big.walletKey }, ids: flowIds, actors: mixedClients.flows },
      ],
      ...m,
      onMixed: () => log(`mixed    each class alone at its mixed rate, ${m.aloneDurationS} s each ...`),
    })
    // The polls' own ceiling: the PK SELECT at the rate the wallets polled, on this database (a request
    // costs more CPU at a moderate rate than at full load, so the full-load ceiling would flatter it).
    const polls = outcome.classes.find((c) => c.mixed.name === 'wallets')!.mixed
    const ceiling = await spawnTarget('ceiling', { databaseUrl: big.url })
    const selects: Scenario = { method: 'GET', paths: big.openIds.map((id) => `/select/${id}`) }
    const pollCeiling = await (async () => {
      // A new process: its JIT warms up at full speed first, as the server's did in the mix.
      await runLoad({ url: ceiling.url, connections, durationS: settings.warmupS * 2, ...selects })
      const rate = Math.max(1, Math.round(polls.rps))
      return measure(ceiling, 'mixed: ceiling select at the poll rate', selects, rate)
    })().finally(() => ceiling.stop())
    log(
      `mixed    ${`ceiling GET /select/:id at ${polls.rps.toFixed(0)} req/s`.padEnd(38)} ${fmt(pollCeiling)}`,
    )
    if (pollCeiling.cpu) {
      record('mixed.ceiling.select_at_poll_rate.cpu.server', pollCeiling.cpu.server, 'µs/req')
      record('mixed.ceiling.select_at_poll_rate.cpu.postgres', pollCeiling.cpu.postgres, 'µs/req')
    }
    const select = ceilingCpu.select
    const insert = ceilingCpu.insert
    for (const c of outcome.classes) {
      const key = `mixed.${names[c.mixed.name]}`
      const perRound = c.mixed.requests / c.mixed.rounds
      const kinds = Object.entries(c.mixed.kinds)
        .map(([kind, l]) => `${kind} p50 ${round(l.p50)} / p99 ${round(l.p99)} ms`)
        .join(', ')
      // Per request for merchants; per poll (from when it was due) for wallets; per whole payment for flows.
      const headline = c.mixed.name === 'merchants' ? c.mixed.latency : c.mixed.roundLatency
      const per = { wallets: 'poll', merchants: 'request', flows: 'payment' }[c.mixed.name]
      log(
        `mixed    ${names[c.mixed.name].padEnd(13)} ${c.mixed.rps.toFixed(0)} req/s (${c.mixed.roundsPerS.toFixed(0)} ` +
          `rounds/s), per ${per} p50 ${round(headline.p50)} ms, p99 ${round(headline.p99)} ms; ${kinds}` +
          (c.mixed.lateS > 1 ? ` (its generator started ${c.mixed.lateS.toFixed(1)} s late)` : ''),
      )
      if (c.mixed.exhausted || c.alone.exhausted) {
        const warning = `mixed: the flows paid all ${n(flowIds.length)} payments before the window ended; their figures undercount`
        log(`mixed    ${warning}`)
        notes.push(warning)
      }
      log(
        `${' '.repeat(23)}CPU per request in the mix: ${c.cpu.server.toFixed(0)} µs server, ` +
          `${c.cpu.postgres.toFixed(0)} µs PostgreSQL; alone at ${c.alone.roundsPerS.toFixed(0)} rounds/s: ` +
          `${c.aloneCpu.server.toFixed(0)} µs, ${c.aloneCpu.postgres.toFixed(0)} µs`,
      )
      // The ceiling of a request: the PK SELECT; a merchant round is one INSERT and two reads.
      const ceilingOf = (side: keyof CpuBreakdown) => {
        if (c.mixed.name === 'wallets') return pollCeiling.cpu?.[side] ?? null
        if (!select) return null
        if (c.mixed.name !== 'merchants') return select[side]
        return insert ? (insert[side] + 2 * select[side]) / 3 : null
      }
      if (c.mixed.name === 'flows')
        record(key, c.mixed.roundsPerS, 'payments/s', state.isolatedFlowRate ?? null)
      else record(key, c.mixed.rps, 'req/s')
      record(`${key}.p50`, headline.p50, 'ms')
      record(`${key}.p99`, headline.p99, 'ms')
      for (const [kind, l] of Object.entries(c.mixed.kinds)) {
        if (c.mixed.name === 'wallets') continue
        record(`${key}.${kind}.p50`, l.p50, 'ms')
        record(`${key}.${kind}.p99`, l.p99, 'ms')
      }
      for (const side of ['server', 'postgres'] as const) {
        const ceiling = ceilingOf(side)
        if (c.mixed.name === 'flows') {
          const unit = 'µs/payment'
          record(
            `${key}.cpu.${side}`,
            c.cpu[side] * perRound,
            unit,
            ceiling === null ? null : ceiling * perRound,
          )
          record(`${key}.cpu.${side}.alone`, c.aloneCpu[side] * perRound, unit, c.cpu[side] * perRound)
        } else {
          record(`${key}.cpu.${side}`, c.cpu[side], 'µs/req', ceiling)
          record(`${key}.cpu.${side}.alone`, c.aloneCpu[side], 'µs/req', c.cpu[side])
        }
      }
    }
    const { total, memory, interference } = outcome
    const mb = (bytes: number) => bytes / 2 ** 20
    log(
      `mixed    CPU over the window: server ${pct(total.serverMs / 1000 / total.windowS)} of a core, PostgreSQL ` +
        `${pct(total.postgresMs / 1000 / total.windowS)}, load generators ${pct(total.loadgenMs / 1000 / total.windowS)}; ` +
        `mixed / alone: server ${interference.server.toFixed(2)}x, PostgreSQL ${interference.postgres.toFixed(2)}x`,
    )
    log(
      `mixed    server RSS: ${mb(memory.startBytes).toFixed(0)} MB before, max ${mb(memory.maxBytes).toFixed(0)} MB, ` +
        `${mb(memory.middleBytes).toFixed(0)} MB mid-window, ${mb(memory.finalBytes).toFixed(0)} MB at the end ` +
        `(${memory.samples} samples); by tenth of the window: ${memory.tenths.map((x) => mb(x).toFixed(0)).join(', ')} MB`,
    )
    record('mixed.cpu.server', (total.serverMs / 1000 / total.windowS) * 100, '% of a core')
    record('mixed.cpu.postgres', (total.postgresMs / 1000 / total.windowS) * 100, '% of a core')
    record('mixed.cpu.loadgen', (total.loadgenMs / 1000 / total.windowS) * 100, '% of a core')
    record('mixed.interference.server', interference.server, 'x')
    record('mixed.interference.postgres', interference.postgres, 'x')
    record('mixed.rss.start', mb(memory.startBytes), 'MB')
    record('mixed.rss.max', mb(memory.maxBytes), 'MB', rssBoundMb)
    record('mixed.rss.final', mb(memory.finalBytes), 'MB', rssBoundMb)
    record('mixed.rss.growth_second_half', mb(memory.finalBytes - memory.middleBytes), 'MB')
    targets.push({
      what: `mixed: server RSS at most ${rssBoundMb} MB during the ${m.durationS} s mixed run`,
      met: memory.maxBytes <= rssBoundMb * 2 ** 20,
      detail:
        `max ${mb(memory.maxBytes).toFixed(0)} MB, final ${mb(memory.finalBytes).toFixed(0)} MB ` +
        `(${mb(memory.startBytes).toFixed(0)} MB before the load)`,
    })
    notes.push(
      `mixed.*: \`caipay serve\` with ${n(big.rows)} payments in the table, ${m.durationS} s after ${m.warmupS} s ` +
        `of warm-up: ${n(mixedClients.wallets)} wallets each polling an open payment's gateway status at its ` +
        `pollInMs; ${mixedClients.merchants} merchant clients in a closed loop, each round POST /v1/payments ` +
        `(Idempotency-Key), its status and an older payment's status; ${mixedClients.flows} wallets in a closed ` +
        'loop paying payments through the gateway (options -> fetch -> confirm -> status). p50/p99 per request ' +
        '(polls: from when each was due; flows: per whole payment, and per step). CPU by class: each class then runs alone at its mixed rate on the same server ' +
        'and database, and the mixed totals of the server process and PostgreSQL are split in proportion to ' +
        'those figures (`*.alone`, whose ratio column is alone / in the mix); `mixed.interference.*` is the ' +
        'mixed total over the sum of the classes alone. Ceilings: for the polls the PK SELECT paced at the ' +
        'poll rate on the same database (`mixed.ceiling.select_at_poll_rate`), for the others the full-load ' +
        'ones (a merchant round is one INSERT and two reads; per payment the SELECT times the requests of a ' +
        'payment), which a moderate rate does not reach: a request costs more CPU when fewer share each ' +
        'event-loop turn. `mixed.rss.*`: ' +
        'VmRSS of the server process sampled during the run; the bound is the ceiling column.',
    )
  } finally {
    await server.stop()
  }
}

export default { name: 'mixed', order: 50, run: mixedPhase } satisfies BenchCase
