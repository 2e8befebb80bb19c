import { describe, expect, it } from 'vitest'
import { PayError } from '../errors/PayError.js'
import { code, coversTransitions, form, paymentId, ready, setup, withForm } from './flowHarness.js'
import { amount, evmAccount, option, solAccount } from './testkit.js'

describe('loadOptions', () => {
  it("advertises the signers' accounts and moves to selecting", async () => {
    const { flow, gateway, of } = setup()
    const loaded = await flow.loadOptions()
    expect(gateway.callsTo('getOptions')).toEqual([
      [paymentId, { accounts: [evmAccount, solAccount] }, { signal: expect.any(AbortSignal) }],
    ])
    expect(loaded.options.map((o) => o.id)).toEqual(['opt_evm', 'opt_mixed'])
    expect(loaded.result).toBeUndefined()
    expect(flow.state).toBe('selecting')
    expect(flow.accounts).toEqual([evmAccount, solAccount])
    expect(of('options')).toEqual([{ options: loaded.options }])
  })

  it('with nothing signable advertises no accounts and takes an empty option list without error', async () => {
    const { flow, gateway, errorCodes } = setup({ signers: [], options: [] })
    await expect(flow.loadOptions()).resolves.toEqual({ options: [] })
    expect(gateway.callsTo('getOptions')[0]![1]).toEqual({ accounts: [] })
    expect(flow.state).toBe('selecting')
    expect(errorCodes()).toEqual([])
  })

  it('ends succeeded when the payment was already paid (resultInfo)', async () => {
    const resultInfo = { txId: '0xpaid', optionAmount: option().amount }
    const { flow, of } = setup({ options: [], response: { resultInfo } })
    const loaded = await flow.loadOptions()
    const result = { paymentId, status: 'succeeded', txId: '0xpaid', optionAmount: option().amount }
    expect(loaded.result).toEqual(result)
    expect(flow.state).toBe('succeeded')
    expect(of('final')).toEqual([result])
    await expect(flow.execute()).resolves.toEqual(result)
  })

  it('ends in the final status the payment info reports', async () => {
    const info = {
      paymentId,
      status: 'expired' as const,
      amount: amount('iso4217/USD', '100'),
      expiresAt: 1,
      merchant: { name: 'Shop', iconUrl: null },
    }
    const { flow } = setup({ options: [], response: { info } })
    const loaded = await flow.loadOptions()
    expect(loaded.result).toEqual({ paymentId, status: 'expired' })
    expect(loaded.info).toEqual(info)
    expect(flow.state).toBe('expired')
  })

  it('ends expired on payment_expired', async () => {
    const expired = new PayError({ code: 'payment_expired', message: 'gone', status: 410 })
    const { flow, of } = setup({ gateway: { getOptions: () => Promise.reject(expired) } })
    await expect(flow.loadOptions()).resolves.toEqual({
      options: [],
      result: { paymentId, status: 'expired' },
    })
    expect(of('final')).toEqual([{ paymentId, status: 'expired' }])
  })

  it('ends failed and rejects when the gateway fails', async () => {
    const notFound = new PayError({ code: 'payment_not_found', message: 'no', status: 404 })
    const { flow, of } = setup({ gateway: { getOptions: () => Promise.reject(notFound) } })
    await expect(flow.loadOptions()).rejects.toBe(notFound)
    expect(flow.state).toBe('failed')
    expect(of('error')).toEqual([notFound])
    expect(of('final')).toEqual([])
  })

  it('wraps a foreign gateway error so callers can still narrow by code', async () => {
    const { flow } = setup({ gateway: { getOptions: () => Promise.reject(new TypeError('boom')) } })
    await expect(flow.loadOptions()).rejects.toThrowError(code('internal_error'))
  })

  it('loads only once', async () => {
    const { flow } = setup()
    await flow.loadOptions()
    await expect(flow.loadOptions()).rejects.toThrowError(code('invalid_transition', { from: 'selecting' }))
    expect(flow.state).toBe('selecting')
  })
})

// --- selecting ---------------------------------------------------------------------------------------

describe('select', () => {
  it('refuses an unknown option and leaves the state alone', async () => {
    const { flow } = setup()
    await flow.loadOptions()
    expect(() => flow.select('opt_nope')).toThrowError(code('unknown_option', { optionId: 'opt_nope' }))
    expect(flow.state).toBe('selecting')
  })

  it('refuses to select before options are loaded', () => {
    const { flow } = setup()
    expect(() => flow.select('opt_evm')).toThrowError(code('invalid_transition', { from: 'idle' }))
  })

  it('opens the form of an option that collects data', async () => {
    const { flow, of } = setup({ options: [withForm] })
    await ready(flow, 'opt_form')
    expect(flow.state).toBe('collectingData')
    expect(flow.collectData).toEqual(form)
    expect(flow.collectDataReady).toBe(false)
    expect(of('collectData')).toEqual([form])
  })

  it("applies the response's payment-wide form to options without their own", async () => {
    const { flow } = setup({ options: [option()], response: { collectData: { url: form.url } } })
    await ready(flow, 'opt_evm')
    expect(flow.state).toBe('collectingData')
    expect(flow.collectData).toEqual({ url: form.url })
  })

  it('goes back to selecting when the user picks an option without a form', async () => {
    const { flow, states } = setup({ options: [withForm, option()] })
    await ready(flow, 'opt_form')
    flow.select('opt_evm')
    expect(flow.state).toBe('selecting')
    expect(flow.selectedOption?.id).toBe('opt_evm')
    expect(states()).toEqual(['loadingOptions', 'selecting', 'collectingData', 'selecting'])
  })

  it('refuses to execute before an option is chosen, without ending the flow', async () => {
    const { flow } = setup()
    await expect(flow.execute()).rejects.toThrowError(code('invalid_transition', { from: 'idle' }))
    await flow.loadOptions()
    await expect(flow.execute()).rejects.toThrowError(code('invalid_transition', { from: 'selecting' }))
    expect(flow.state).toBe('selecting')
  })
})

coversTransitions('options')
