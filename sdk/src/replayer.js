/** Test support only: rrweb's Replayer, so the browser tests can replay stored segments. */
import { Replayer } from 'rrweb';

window.svcReplay = function svcReplay(events, root) {
  const replayer = new Replayer(events, { root, showWarning: false, mouseTail: false });
  replayer.play();
  return replayer;
};
