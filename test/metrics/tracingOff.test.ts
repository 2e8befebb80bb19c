import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestDatabase, type TestDatabase } from '../postgres.js'

/**
 * Tracing costs nothing unless configured: without OTEL_EXPORTER_OTLP_ENDPOINT a running caipay has
 * loaded no OpenTelemetry SDK module (no tracer provider, span processor, exporter, context manager or
 * resource). Only the API's no-op package is there, which prom-client itself loads (its process CPU
 * metric), tracing or not. The same child with the variable set shows the check sees the SDK when loaded.
 */
const child = path.join(import.meta.dirname, 'loadedModules.ts')
let database: TestDatabase
beforeAll(async () => {
  database = await createTestDatabase()
})
afterAll(async () => {
  await database?.drop()
})

async function runCaipay(otel: Record<string, string>): Promise<{ tracing: boolean; scripts: string[] }> {
  const environment: NodeJS.ProcessEnv = { ...process.env, CAIPAY_TEST_DATABASE_URL: database.url, ...otel }
  for (const name of Object.keys(environment))
    if (name.startsWith('OTEL_') && !(name in otel)) delete environment[name]
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', child], {
    env: environment,
    maxBuffer: 64 * 1024 * 1024,
  })
  return JSON.parse(stdout)
}

const openTelemetry = (scripts: string[]) => scripts.filter((url) => url.includes('@opentelemetry/'))
const beyondTheApi = (scripts: string[]) =>
  openTelemetry(scripts).filter((url) => !url.includes('@opentelemetry/api/'))

describe('tracing off (no OTEL_EXPORTER_OTLP_ENDPOINT)', () => {
  it('loads no OpenTelemetry SDK module; with the endpoint set, the SDK and the exporter are loaded', {
    timeout: 120_000,
  }, async () => {
    const off = await runCaipay({})
    expect(off.tracing).toBe(false)
    // The check sees the server's own modules, so an empty list below means something.
    expect(off.scripts.some((url) => url.includes('src/server/jobs/runner'))).toBe(true)
    expect(beyondTheApi(off.scripts)).toEqual([])
    expect(off.scripts.some((url) => url.includes('tracingSdk'))).toBe(false)

    // A closed port: spans would fail to export, which the SDK only logs.
    const on = await runCaipay({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' })
    expect(on.tracing).toBe(true)
    const loaded = beyondTheApi(on.scripts).join('\n')
    expect(loaded).toContain('@opentelemetry/sdk-trace')
    expect(loaded).toContain('@opentelemetry/exporter-trace-otlp-http')
  })
})
