import { describe, expect, it } from 'vitest'
import { PayError } from '../errors/PayError.js'
import { code, coversTransitions, form, paymentId, ready, setup, withForm } from './flowHarness.js'
import { option } from './testkit.js'

describe('collect data', () => {
  it('needs IC_COMPLETE before fetching; then proceeds', async () => {
    const { flow, gateway, states } = setup({ options: [withForm] })
    await ready(flow, 'opt_form')
    await expect(flow.execute()).rejects.toThrowError(code('invalid_transition', { from: 'collectingData' }))
    expect(flow.state).toBe('collectingData')

    const url = flow.collectDataUrl({ prefill: { fullName: 'Ada', phone: '1' }, theme: 'light' })
    expect(url).toBe(`${form.url}?prefill=eyJmdWxsTmFtZSI6IkFkYSJ9&theme=light`)
    expect(flow.completeCollectData('{"type":"IC_COMPLETE"}')).toEqual({ type: 'complete' })
    expect(flow.collectDataReady).toBe(true)
    expect(flow.state).toBe('collectingData')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
    expect(states()).toContain('fetchingActions')
    expect(gateway.callsTo('confirm')).toHaveLength(1)
  })

  it('reports IC_ERROR as collect_data_failed and stays for a retry', async () => {
    const { flow, of } = setup({ options: [withForm] })
    await ready(flow, 'opt_form')
    expect(flow.completeCollectData({ type: 'IC_ERROR', error: 'Country is invalid.' })).toEqual({
      type: 'error',
      error: 'Country is invalid.',
    })
    expect(of('error')).toEqual([code('collect_data_failed', { error: 'Country is invalid.' })])
    expect(flow.state).toBe('collectingData')
    expect(flow.collectDataReady).toBe(false)

    flow.completeCollectData({ type: 'IC_COMPLETE' })
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
  })

  it('can be cancelled while the form is open', async () => {
    const { flow, gateway, states } = setup({ options: [withForm] })
    await ready(flow, 'opt_form')
    await expect(flow.cancel()).resolves.toEqual({ paymentId, status: 'cancelled' })
    expect(gateway.callsTo('cancel')).toHaveLength(1)
    expect(states().slice(-2)).toEqual(['collectingData', 'cancelled'])
  })

  it('ignores messages that are not the form, and refuses form messages when no form is open', async () => {
    const { flow } = setup({ options: [withForm, option()] })
    await ready(flow, 'opt_form')
    expect(flow.completeCollectData({ type: 'webpackOk' })).toBeUndefined()
    expect(flow.completeCollectData('hello')).toBeUndefined()
    expect(flow.collectDataReady).toBe(false)
    flow.select('opt_evm')
    expect(() => flow.completeCollectData('IC_COMPLETE')).toThrowError(code('invalid_transition'))
    expect(() => flow.collectDataUrl()).toThrowError(code('collect_data_failed'))
  })

  it('does not ask twice for a form already completed when the user switches back', async () => {
    const { flow } = setup({ options: [withForm, option()] })
    await ready(flow, 'opt_form')
    flow.completeCollectData('IC_COMPLETE')
    flow.select('opt_evm')
    flow.select('opt_form')
    expect(flow.state).toBe('selecting')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
  })

  it('drives the form through onCollectData, retrying after IC_ERROR with its text', async () => {
    const requests: unknown[] = []
    const answers = [{ type: 'IC_ERROR', error: 'Enter a valid date.' }, 'garbage', '{"type":"IC_COMPLETE"}']
    const { flow } = setup({
      options: [withForm],
      flow: {
        onCollectData: async (request) => {
          requests.push(request)
          return answers.shift()
        },
        collectDataUrl: { theme: 'dark' },
      },
    })
    await ready(flow, 'opt_form')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
    const url = `${form.url}?theme=dark`
    expect(requests).toEqual([
      { url, schema: form.schema },
      { url, schema: form.schema, error: 'Enter a valid date.' },
      { url, schema: form.schema, error: 'The form posted no completion message.' },
    ])
  })

  it('fails with collect_data_failed when onCollectData throws, and cancels when the user declines', async () => {
    const a = setup({
      options: [withForm],
      flow: { onCollectData: () => Promise.reject(new Error('webview crashed')) },
    })
    await ready(a.flow, 'opt_form')
    await expect(a.flow.execute()).rejects.toThrowError(code('collect_data_failed'))
    expect(a.states().slice(-2)).toEqual(['collectingData', 'failed'])

    const declined = new PayError({ code: 'user_rejected', message: 'closed the form' })
    const b = setup({ options: [withForm], flow: { onCollectData: () => Promise.reject(declined) } })
    await ready(b.flow, 'opt_form')
    await expect(b.flow.execute()).resolves.toEqual({ paymentId, status: 'cancelled' })
    expect(b.gateway.callsTo('cancel')).toHaveLength(1)
  })
})

// --- rejection, abort and cancel ------------------------------------------------------------------------

coversTransitions('collecting')
