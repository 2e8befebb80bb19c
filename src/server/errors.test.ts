import { describe, expect, it } from 'vitest'
import { serviceErrorCodes, serviceErrorStatus } from '../contract/errors.js'
import { PayError } from '../errors/PayError.js'
import { renderError, validationError } from './errors.js'

describe('renderError', () => {
  it('renders an unreachable database as 503 internal_error with Retry-After, and a bad statement as unknown', () => {
    const unavailable = [
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      Object.assign(new Error('terminating connection due to administrator command'), {
        code: '57P01',
        severity: 'FATAL',
      }),
      Object.assign(new Error('the database system is starting up'), { code: '57P03', severity: 'FATAL' }),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
      new AggregateError([Object.assign(new Error('refused'), { code: 'ECONNREFUSED' })]),
    ]
    for (const error of unavailable) {
      expect(renderError(error), error.message).toEqual({
        status: 503,
        body: { code: 'internal_error', message: 'The database is unavailable; retry shortly.' },
        headers: { 'retry-after': '2' },
      })
    }
    const syntax = Object.assign(new Error('syntax error at or near "SELEC"'), {
      code: '42601',
      severity: 'ERROR',
    })
    expect(renderError(syntax)).toBeUndefined()
  })
  it('renders every service code with its table status', () => {
    for (const code of serviceErrorCodes) {
      const rendered = renderError(new PayError({ code, message: 'm' }))
      expect(rendered?.status, code).toBe(serviceErrorStatus[code])
      expect(rendered?.body.code).toBe(code)
    }
  })
  it('adds issues to params_validation', () => {
    const rendered = renderError(validationError([{ path: 'body.a', message: 'bad' }]))
    expect(rendered).toEqual({
      status: 400,
      body: {
        code: 'params_validation',
        message: 'Invalid request: body.a: bad',
        issues: [{ path: 'body.a', message: 'bad' }],
      },
    })
  })
  it("maps Fastify's request errors to invalid_params and leaves the rest unknown", () => {
    expect(
      renderError(Object.assign(new Error('x'), { statusCode: 413, code: 'FST_ERR_CTP_BODY_TOO_LARGE' }))
        ?.body,
    ).toEqual({
      code: 'invalid_params',
      message: 'Request body is too large.',
    })
    expect(renderError(new Error('boom'))).toBeUndefined()
    expect(renderError(new PayError({ code: 'invalid_caip', message: 'x' }))).toBeUndefined()
  })
})
