// softnic's own threads (slot holder, descriptor service, progress) take no signals: a
// process-directed signal, such as the SIGALRM of a program's interval timer, must
// interrupt the program's own threads, as on a NIC whose library starts none. The mask is
// set before the thread starts, so no signal lands on it before its first instruction.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace softnic {

template <typename Function, typename... Args>
void StartBackgroundThread(Function&& function, Args&&... args) {
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  struct RestoreMask {
    const sigset_t* mask;
    ~RestoreMask() { pthread_sigmask(SIG_SETMASK, mask, nullptr); }
  } restore{&previous};
  std::thread(std::forward<Function>(function), std::forward<Args>(args)...).detach();
}

}  // namespace softnic
