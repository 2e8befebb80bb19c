import { describe, expect, it } from 'vitest'
import { isPayError, PayError } from '../../src/errors/PayError.js'
import { toPayError, withAbort } from './errors.js'

const named = (name: string, cause?: unknown) => Object.assign(new Error(name, { cause }), { name })

describe('toPayError', () => {
  it('keeps a PayError as it is', () => {
    const error = new PayError({ code: 'invalid_action', message: 'x' })
    expect(toPayError(error)).toBe(error)
  })

  it.each([
    ['user_rejected', 4001],
    ['unsupported_method', 4200],
    ['action_rejected', -32000],
  ] as const)('maps to %s by the deepest code in the cause chain (%i)', (code, rpcCode) => {
    const error = Object.assign(new Error('outer', { cause: { code: rpcCode } }), { code: -1 })
    const mapped = toPayError(error, { method: 'eth_sendTransaction' })
    expect(mapped.code).toBe(code)
    expect(mapped.context).toEqual({ method: 'eth_sendTransaction', rpcCode })
    expect(mapped.cause).toBe(error)
  })

  it('calls a transport failure without a code network_error, with its short message', () => {
    const error = Object.assign(named('WrapperError', named('HttpRequestError')), { shortMessage: 'down' })
    const mapped = toPayError(error)
    expect(mapped.code).toBe('network_error')
    expect(mapped.details).toBe('down')
  })

  it('calls anything else action_rejected', () => {
    const mapped = toPayError('nope')
    expect(mapped.code).toBe('action_rejected')
    expect(mapped.details).toBe('nope')
  })
})

describe('withAbort', () => {
  it('passes the work through without a signal', async () => {
    await expect(withAbort(Promise.resolve(1), undefined)).resolves.toBe(1)
  })

  it('stops waiting when the signal aborts, with the context and the reason as cause', async () => {
    const controller = new AbortController()
    const pending = withAbort(new Promise(() => undefined), controller.signal, { index: 2 })
    controller.abort('stop')
    const error = await pending.catch((e: unknown) => e)
    expect(isPayError(error, 'aborted')).toBe(true)
    expect((error as PayError).context).toEqual({ index: 2 })
    expect((error as PayError).cause).toBe('stop')
  })

  it('rejects at once on an aborted signal, keeping a late failure of the work quiet', async () => {
    const work = Promise.reject(new Error('late'))
    await expect(withAbort(work, AbortSignal.abort())).rejects.toMatchObject({ code: 'aborted' })
  })
})
