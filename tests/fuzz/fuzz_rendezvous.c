/* fuzz_rendezvous.c - the rendezvous server's registration parser
 * (sg_rdv_parse_registration).  The input is one message body as a rank,
 * or anyone who reaches the socket, sends it.  What it accepts must fit
 * the fixed buffers and be NUL-terminated.
 */
#include <string.h>

#include "fuzz.h"
#include "rendezvous.h"
#include "transport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int rank, nranks;
  char host[64], ep[256];
  if (sg_rdv_parse_registration(data, size, &rank, &nranks, host, ep) == 0) {
    fuzz_require(memchr(host, '\0', sizeof host) != NULL);
    fuzz_require(memchr(ep, '\0', sizeof ep) != NULL);
    fuzz_require(strlen(host) > 0 && strlen(ep) > 0);
    fuzz_require(!strchr(host, ' ') && !strchr(ep, ' ') && !strchr(ep, '\n'));
  }
  return 0;
}
