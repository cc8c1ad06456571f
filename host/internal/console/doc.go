// Package console is capgate's admin console: server-rendered pages at
// /admin for people holding an admin-scope token, over the admin API.
//
// The console decides nothing about the host. Every page reads, and every
// button changes, through the admin API's own handlers, called in process
// as the signed-in token (see API): the scope and permission checks, the
// validation of every parameter, the audit records of each decision and
// the problem details of each error are the API's, in one place. What the
// console adds is the browser's side of it: a signed session cookie that
// stands for a token without holding it, forms that cannot be forged from
// another site, and pages.
//
// Pages are html/template files and one stylesheet, embedded in the
// binary; the only script is the audit trail's live tail, a few lines
// that poll. Nothing is fetched from any other origin.
package console
