import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { freePort } from '../ports.js'

/**
 * A real Prometheus (Debian's `prometheus` package; .ci/run installs it) scraping `targets` every
 * second, with its storage in a temporary directory, on a loopback port of its own.
 */
export interface PrometheusServer {
  url: string
  /** An instant query's vector, as `{labels, value}` rows. */
  query(expr: string): Promise<{ metric: Record<string, string>; value: number }[]>
  /** Waits until Prometheus has scraped every target at least once after `since` (ms epoch). */
  scrapedAfter(since: number, timeoutMs?: number): Promise<void>
  stop(): Promise<void>
}

export async function startPrometheus(targets: readonly string[]): Promise<PrometheusServer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'caipay-prometheus-'))
  const config = path.join(dir, 'prometheus.yml')
  await writeFile(
    config,
    [
      'global:',
      '  scrape_interval: 1s',
      '  scrape_timeout: 1s',
      'scrape_configs:',
      '  - job_name: caipay',
      '    static_configs:',
      `      - targets: [${targets.map((t) => `'${t}'`).join(', ')}]`,
      '',
    ].join('\n'),
  )
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const child: ChildProcess = spawn(
    'prometheus',
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let stderr = ''
  child.stderr?.on('data', (chunk) => {
    stderr += String(chunk)
  })
  const deadline = Date.now() + 20_000
  for (;;) {
    try {
      if ((await fetch(`${url}/-/ready`)).ok) break
    } catch {
      // Not listening yet.
    }
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`Prometheus did not start: ${stderr.slice(-2000)}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const server: PrometheusServer = {
    url,
    async query(expr) {
      const response = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`)
      const body = (await response.json()) as {
        status: string
        error?: string
        data: { result: { metric: Record<string, string>; value: [number, string] }[] }
      }
      if (body.status !== 'success') throw new Error(`Query ${expr} failed: ${body.error}`)
      return body.data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }))
    },
    async scrapedAfter(since, timeoutMs = 15_000) {
      const end = Date.now() + timeoutMs
      for (;;) {
        const response = await fetch(`${url}/api/v1/targets`)
        const { data } = (await response.json()) as {
          data: { activeTargets: { lastScrape: string; health: string; lastError: string }[] }
        }
        const targets = data.activeTargets
        if (targets.length > 0 && targets.every((t) => t.health === 'up' && Date.parse(t.lastScrape) > since))
          return
        if (Date.now() > end) throw new Error(`No fresh scrape: ${JSON.stringify(targets)}`)
        await new Promise((resolve) => setTimeout(resolve, 200))
      }
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve))
        child.kill('SIGTERM')
        await exited
      }
      await rm(dir, { recursive: true, force: true })
    },
  }
  return server
}
