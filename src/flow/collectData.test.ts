import { describe, expect, it } from 'vitest'
import {
  base64UrlEncode,
  buildCollectDataUrl,
  parseCollectDataMessage,
  requiredFields,
} from './collectData.js'

const schema = JSON.stringify({
  type: 'object',
  required: ['fullName', 'dateOfBirth'],
  properties: { fullName: { type: 'string' }, dateOfBirth: { type: 'string' }, nickname: { type: 'string' } },
})
const form = { url: 'https://pay.example/collect/pay_1?optionId=o1', schema }

function decode(value: string): unknown {
  const b64 = value.replace(/-/g, '+').replace(/_/g, '/')
  const bytes = Uint8Array.from(atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0))
  return JSON.parse(new TextDecoder().decode(bytes))
}

describe('buildCollectDataUrl', () => {
  it('returns the form URL untouched without options', () => {
    expect(buildCollectDataUrl(form)).toBe(form.url)
  })

  it('prefills only the fields the schema requires, as base64url JSON', () => {
    const url = buildCollectDataUrl(form, {
      prefill: { fullName: 'Zoë Ünal', nickname: 'z', dateOfBirth: '1990-01-02', email: 'z@x' },
    })
    const prefill = new URL(url).searchParams.get('prefill')!
    expect(prefill).toMatch(/^[A-Za-z0-9_-]+$/)
    expect(decode(prefill)).toEqual({ fullName: 'Zoë Ünal', dateOfBirth: '1990-01-02' })
    expect(url.startsWith(`${form.url}&prefill=`)).toBe(true)
  })

  it('adds theme and appends themeVariables verbatim, before any fragment', () => {
    const url = buildCollectDataUrl(
      { url: 'https://pay.example/collect#top' },
      { theme: 'dark', themeVariables: 'eyJhY2NlbnQiOiIjZjAwIn0' },
    )
    expect(url).toBe('https://pay.example/collect?theme=dark&themeVariables=eyJhY2NlbnQiOiIjZjAwIn0#top')
  })

  it('omits prefill when no known field is required, or when there is no schema', () => {
    expect(buildCollectDataUrl(form, { prefill: { nickname: 'z' } })).toBe(form.url)
    expect(buildCollectDataUrl({ url: form.url }, { prefill: { fullName: 'A' } })).toBe(form.url)
  })

  it('refuses themeVariables that could inject parameters', () => {
    expect(() => buildCollectDataUrl(form, { themeVariables: 'abc&prefill=x' })).toThrowError(
      expect.objectContaining({ code: 'invalid_params' }),
    )
  })
})

describe('requiredFields', () => {
  it('reads the top-level required list and survives bad schemas', () => {
    expect(requiredFields(schema)).toEqual(['fullName', 'dateOfBirth'])
    expect(requiredFields('not json')).toEqual([])
    expect(requiredFields('null')).toEqual([])
    expect(requiredFields(JSON.stringify({ required: ['a', 3] }))).toEqual(['a'])
    expect(requiredFields(undefined)).toEqual([])
  })
})

describe('parseCollectDataMessage', () => {
  it.each([
    [{ type: 'IC_COMPLETE' }, { type: 'complete' }],
    ['{"type":"IC_COMPLETE"}', { type: 'complete' }],
    ['IC_COMPLETE', { type: 'complete' }],
    [
      { type: 'IC_ERROR', error: 'Country is invalid.' },
      { type: 'error', error: 'Country is invalid.' },
    ],
    ['{"type":"IC_ERROR","error":"Network error"}', { type: 'error', error: 'Network error' }],
    ['IC_ERROR', { type: 'error', error: 'Data collection failed.' }],
  ])('reads %j', (data, expected) => {
    expect(parseCollectDataMessage(data)).toEqual(expected)
  })

  it.each([[null], [42], ['hello'], ['{"type":"other"}'], [{ type: 'webpackOk' }], [{}]])(
    'ignores %j (not the form)',
    (data) => {
      expect(parseCollectDataMessage(data)).toBeUndefined()
    },
  )
})

describe('base64UrlEncode', () => {
  it('encodes UTF-8 without padding or URL-unsafe characters', () => {
    expect(base64UrlEncode('??>')).toBe('Pz8-')
    expect(base64UrlEncode('é')).toBe('w6k')
  })
})
