import type { Page } from 'playwright-core'
import { describe, expect, it } from 'vitest'
import { docsDocuments } from '../../src/server/docs.js'
import { useBrowserEnv } from './support.js'

interface Operation {
  operationId: string
  summary?: string
  tags?: string[]
  parameters?: { name: string; in: string; required?: boolean }[]
  requestBody?: {
    content: Record<string, { examples?: Record<string, { summary: string; value: unknown }> }>
  }
  responses: Record<string, { description: string }>
}

interface Document {
  info: { title: string }
  components: { securitySchemes: Record<string, { type: string; in: string; name: string }> }
  paths: Record<string, Record<string, Operation>>
}

const suite = useBrowserEnv()

async function published(url: string): Promise<Document> {
  return (await fetch(`${suite.env.baseUrl}${url}`)).json() as Promise<Document>
}

function operationsOf(document: Document): Operation[] {
  return Object.values(document.paths).flatMap((item) => Object.values(item))
}

/** Swagger UI's element id of an operation (tags and ids with spaces are joined with `_`). */
function elementId(operation: Operation): string {
  return `operations-${operation.tags![0]!.replace(/\s/g, '_')}-${operation.operationId}`
}

interface Visit {
  page: Page
  /** Every URL the page requested, resources and API calls alike. */
  requests: string[]
  /** Console errors (CSP violations among them) and uncaught exceptions. */
  errors: string[]
}

async function open(path: string, operationCount: number): Promise<Visit> {
  const page = await suite.browser.newPage({ viewport: { width: 1280, height: 900 } })
  const visit: Visit = { page, requests: [], errors: [] }
  page.on('request', (request) => visit.requests.push(request.url()))
  page.on('console', (message) => {
    if (message.type() === 'error') visit.errors.push(message.text())
  })
  page.on('pageerror', (error) => visit.errors.push(error.message))
  await page.goto(`${suite.env.baseUrl}${path}`)
  await page.waitForFunction((n) => document.querySelectorAll('.opblock').length >= n, operationCount, {
    timeout: 30_000,
  })
  return visit
}

/** The requests that went anywhere but this machine's loopback (data: URLs stay in the page). */
function offLoopback(urls: string[]): string[] {
  return urls.filter((url) => {
    const { protocol, hostname } = new URL(url)
    return protocol !== 'data:' && protocol !== 'blob:' && hostname !== '127.0.0.1'
  })
}

// Each page parses a 2 MB script and each expanded operation is a React render: a few seconds on an idle
// machine, tens of seconds on a loaded two-core one.
describe('/docs in real Chromium', { timeout: 90_000 }, () => {
  it.each(docsDocuments)(
    '$page renders every operation of $url, offline, with its credentials offered',
    async ({ url, page: path }) => {
      const document = await published(url)
      const operations = operationsOf(document)
      const visit = await open(path, operations.length)
      const { page } = visit

      expect(await page.locator('.information-container .title').innerText()).toContain(document.info.title)
      const rendered = await page.$$eval('.opblock', (blocks) =>
        blocks.map((block) => ({
          id: block.id,
          operationId: block.querySelector('.opblock-summary-operation-id')?.textContent ?? '',
          summary: block.querySelector('.opblock-summary-description')?.textContent ?? '',
        })),
      )
      expect(rendered.map((r) => r.operationId).sort()).toEqual(operations.map((o) => o.operationId).sort())
      for (const operation of operations) {
        const block = rendered.find((r) => r.id === elementId(operation))
        expect(block?.summary, operation.operationId).toBe(operation.summary)
      }

      // Try-it's credentials: every security scheme of the document, by its header name.
      await page.locator('.auth-wrapper .authorize').click()
      const dialog = page.locator('.modal-ux')
      for (const scheme of Object.values(document.components.securitySchemes)) {
        expect(scheme.in).toBe('header')
        await expect
          .poll(() => dialog.getByText(`Name: ${scheme.name}`, { exact: true }).count())
          .toBeGreaterThan(0)
      }
      expect(Object.values(document.components.securitySchemes).map((s) => s.name)).toContain('Api-Key')

      expect(offLoopback(visit.requests)).toEqual([])
      expect(visit.errors).toEqual([])
      await page.close()
    },
  )

  it('shows the body examples and the error codes of every status, an operation of each tag', async () => {
    const document = await published('/openapi.json')
    const operations = operationsOf(document)
    const visit = await open('/docs', operations.length)
    // Each expanded operation is a render of seconds on a loaded machine: the first with body examples
    // of each tag covers every kind of credentials and every status the pipeline answers.
    const withExamples = operations.filter((o) => o.requestBody?.content['application/json']?.examples)
    const sample = withExamples.filter(
      (o, i) => withExamples.findIndex((p) => p.tags![0] === o.tags![0]) === i,
    )
    expect(sample.length).toBeGreaterThanOrEqual(4)
    for (const operation of sample) {
      const block = visit.page.locator(`#${elementId(operation)}`)
      await block.locator('.opblock-summary-control').click()
      await block.locator('.opblock-body').waitFor()

      const examples = Object.values(operation.requestBody!.content['application/json']!.examples!)
      // The body and its parts render in separate passes: poll rather than read the first pass.
      const options = block.locator('.opblock-section-request-body .examples-select-element option')
      await expect
        .poll(() => options.allInnerTexts(), { message: operation.operationId, timeout: 30_000 })
        .toEqual(examples.map((e) => e.summary))
      const shown = await block.locator('.opblock-section-request-body .body-param__example').innerText()
      expect(JSON.parse(shown), operation.operationId).toEqual(examples[0]!.value)

      // Each status's row lists the codes its description names (`code`, `code`, ...).
      await expect
        .poll(() => block.locator('.responses-wrapper tr.response').count(), { timeout: 30_000 })
        .toBe(Object.keys(operation.responses).length)
      const rows = Object.fromEntries(
        await block
          .locator('.responses-wrapper tr.response')
          .evaluateAll((trs) =>
            trs.map((tr) => [
              tr.getAttribute('data-code'),
              tr.querySelector('.response-col_description')?.textContent,
            ]),
          ),
      )
      for (const [status, response] of Object.entries(operation.responses)) {
        const codes = (response.description.match(/`[a-z_]+`/g) ?? []).map((code) => code.slice(1, -1))
        for (const code of codes) expect(rows[status], `${operation.operationId} ${status}`).toContain(code)
      }
      if (operation.operationId !== 'createPayment') await block.locator('.opblock-summary-control').click()
    }

    // A schema as properties with their constraints, not JSON text.
    const create = visit.page.locator(`#${elementId(document.paths['/v1/payments']!.post!)}`)
    await create.getByRole('tab', { name: 'Schema' }).first().click()
    const schema = create.locator('.opblock-section-request-body .json-schema-2020-12').first()
    expect(await schema.innerText()).toMatch(/referenceId\*?\s*string\s*\[1, 35\] characters/)

    expect(offLoopback(visit.requests)).toEqual([])
    expect(visit.errors).toEqual([])
    await visit.page.close()
  })

  it('try-it sends the Api-Key and Merchant-Id headers and shows the answer', async () => {
    const document = await published('/openapi.json')
    const operation = document.paths['/v1/payments']!.post!
    const visit = await open(`/docs#/Payments/${operation.operationId}`, operationsOf(document).length)
    const { page } = visit

    await page.locator('.auth-wrapper .authorize').click()
    const apiKeyForm = page.locator('.auth-container').filter({ hasText: 'Name: Api-Key' })
    await apiKeyForm.locator('input').fill(suite.env.apiKey)
    await apiKeyForm.locator('button.authorize').click()
    await page.locator('.modal-ux .btn-done').first().click()

    const block = page.locator(`#${elementId(operation)}`)
    await block.locator('.try-out__btn').click()
    await block.locator('tr[data-param-name="Merchant-Id"] input').fill(suite.env.merchantId)
    const idempotency = operation.parameters!.find((p) => p.name === 'Idempotency-Key')
    if (idempotency?.required)
      await block.locator('tr[data-param-name="Idempotency-Key"] input').fill('docs-try-it-1')
    const sent = page.waitForRequest(
      (request) => request.method() === 'POST' && request.url().endsWith('/v1/payments'),
    )
    await block.locator('.execute').click()
    const headers = (await sent).headers()
    expect(headers['api-key']).toBe(suite.env.apiKey)
    expect(headers['merchant-id']).toBe(suite.env.merchantId)

    const status = block.locator('.live-responses-table tbody .response-col_status').first()
    await expect.poll(() => status.innerText(), { timeout: 10_000 }).toBe('201')
    const body = JSON.parse(await block.locator('.live-responses-table .microlight').first().innerText())
    const created = await suite.env.t.request({
      method: 'GET',
      url: `/v1/payments/${body.paymentId}`,
      headers: { 'api-key': suite.env.apiKey, 'merchant-id': suite.env.merchantId },
    })
    expect(created.json.referenceId).toBe('order-1042')

    expect(offLoopback(visit.requests)).toEqual([])
    expect(visit.errors).toEqual([])
    await page.close()
  })
})
