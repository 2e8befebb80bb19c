/**
 * The hosted data-collection form (`collectData.url`). Server-rendered, no framework; the same markup
 * works in a popup, an iframe and a React Native WebView. It submits straight to the service, then tells
 * its host with `IC_COMPLETE` or `IC_ERROR` (spec gateway rule 2).
 */
import { collectFields } from '../gateway/collectData.js'
import { escapeHtml, type Page, renderPage, scriptJson } from './html.js'

export interface CollectPageInput {
  paymentId: string
  optionId: string
  merchantName: string
  /** e.g. "1,250.00 USD" */
  amountText: string
  prefill: Readonly<Record<string, string>>
  theme: 'light' | 'dark'
  /** Validated `--name: value;` declarations from `themeVariables`. */
  rootVariables: string
  /** Set when the form cannot be used (unknown option, payment no longer payable). */
  unavailable?: string
}

export function renderCollectPage(input: CollectPageInput): Page {
  const submitUrl = `/v1/gateway/payment/${encodeURIComponent(input.paymentId)}/collect-data`
  const fields = collectFields
    .map((f) => {
      const value = input.prefill[f.name] ?? ''
      const extra =
        f.name === 'country'
          ? ' maxlength="2" autocapitalize="characters" placeholder="e.g. DE" pattern="[A-Za-z]{2}"'
          : f.input === 'date'
            ? ` max="${new Date().toISOString().slice(0, 10)}"`
            : ' maxlength="200"'
      return `<label for="${f.name}">${escapeHtml(f.title)}</label>
<input id="${f.name}" name="${f.name}" type="${f.input}" autocomplete="${f.autocomplete}" required${extra} value="${escapeHtml(value)}">
<p class="field-error" id="${f.name}-error" role="alert"></p>`
    })
    .join('\n')
  const body = input.unavailable
    ? `<main><div class="card"><h1>Form unavailable</h1><p class="muted" id="unavailable">${escapeHtml(input.unavailable)}</p></div></main>`
    : `<main>
<div class="card">
<h1>Your details</h1>
<p class="muted">${escapeHtml(input.merchantName)} needs these details for a payment of <strong>${escapeHtml(input.amountText)}</strong>. They go to the payment service only.</p>
<form id="collect" novalidate>
${fields}
<p class="banner" id="banner" role="alert" hidden></p>
<button type="submit" id="submit">Continue</button>
</form>
<div id="done" hidden><h1>Thank you</h1><p class="muted">You can return to your wallet to finish the payment.</p></div>
</div>
</main>`
  return renderPage({
    title: 'Your details',
    body,
    style,
    script: script(
      scriptJson({ submitUrl, optionId: input.optionId, unavailable: input.unavailable ?? null }),
    ),
    rootVariables: input.rootVariables,
    theme: input.theme,
    frameAncestors: '*',
  })
}

const style = `
form{margin-top:16px}
label{display:block;font-weight:600;margin:14px 0 6px}
input{width:100%;min-height:46px;padding:10px 12px;border:1px solid var(--border);border-radius:calc(var(--radius) - 6px);
background:var(--bg);color:var(--text);font:inherit}
input:focus{outline:2px solid var(--accent);outline-offset:1px}
input[aria-invalid=true]{border-color:var(--error)}
.field-error{color:var(--error);font-size:.85rem;margin:4px 0 0;min-height:1em}
.banner{color:var(--error);margin:12px 0}
button{margin-top:18px}
`

/** Mirrors gateway/collectData.ts fieldProblems so the user sees problems before a round trip. */
function script(config: string): string {
  return `(function(){
var cfg=${config};
function post(msg){
  try{if(window.opener&&window.opener!==window)window.opener.postMessage(msg,'*')}catch(e){}
  try{if(window.parent&&window.parent!==window)window.parent.postMessage(msg,'*')}catch(e){}
  try{if(window.ReactNativeWebView)window.ReactNativeWebView.postMessage(JSON.stringify(msg))}catch(e){}
}
if(cfg.unavailable){post({type:'IC_ERROR',error:cfg.unavailable});return}
var form=document.getElementById('collect'),button=document.getElementById('submit'),banner=document.getElementById('banner');
var country=document.getElementById('country');
country.addEventListener('input',function(){country.value=country.value.toUpperCase()});
function problems(f){
  var p={},today=new Date().toISOString().slice(0,10);
  if(!f.fullName.trim()||f.fullName.length>200)p.fullName='Enter your full name.';
  var d=/^\\d{4}-\\d{2}-\\d{2}$/.test(f.dateOfBirth)?new Date(f.dateOfBirth+'T00:00:00Z'):null;
  if(!d||isNaN(d.getTime())||d.toISOString().slice(0,10)!==f.dateOfBirth)p.dateOfBirth='Enter a valid date.';
  else if(f.dateOfBirth>today||d.getUTCFullYear()<1900)p.dateOfBirth='Enter a past date.';
  if(!/^[A-Z]{2}$/.test(f.country))p.country='Enter a two-letter country code.';
  return p;
}
function show(p){
  ['fullName','dateOfBirth','country'].forEach(function(n){
    var input=document.getElementById(n);
    document.getElementById(n+'-error').textContent=p[n]||'';
    input.setAttribute('aria-invalid',p[n]?'true':'false');
  });
}
function fail(text){
  banner.textContent=text;banner.hidden=false;button.disabled=false;
  post({type:'IC_ERROR',error:text});
}
form.addEventListener('submit',function(ev){
  ev.preventDefault();banner.hidden=true;
  var f={fullName:form.fullName.value.trim(),dateOfBirth:form.dateOfBirth.value,country:form.country.value.trim().toUpperCase()};
  var p=problems(f);show(p);
  var first=Object.keys(p)[0];
  if(first){document.getElementById(first).focus();return}
  button.disabled=true;
  fetch(cfg.submitUrl,{method:'POST',headers:{'content-type':'application/json'},body:JSON.stringify({optionId:cfg.optionId,fields:f})})
  .then(function(r){
    if(r.ok){form.hidden=true;document.getElementById('done').hidden=false;post({type:'IC_COMPLETE'});return}
    return r.json().then(function(b){fail((b&&b.message)||('Submission failed ('+r.status+').'))},function(){fail('Submission failed ('+r.status+').')});
  },function(){fail('Network error: the details were not sent.')});
});
})();`
}
