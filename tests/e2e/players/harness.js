// Test harness: one independent player (Shaka Player or video.js, from npm) on the page,
// behind the same small API as mirror's own player page (`window.mirrorPlayer`), so the
// browser tests drive every player the same way. Served by the test on mirror serve's
// origin; `?player=shaka|videojs&master=<the item's master.m3u8 on mirror serve>`, and
// `&text=<language>` for the subtitle Shaka chooses before loading (see startShaka).
"use strict";
const params = new URLSearchParams(location.search);
const master = params.get("master");
const video = document.getElementById("video");
const status = document.getElementById("status");
const errors = [];
const fail = (text) => { errors.push(String(text)); status.textContent = "failed: " + text; };

function showingCue(tracks) {
  for (const track of Array.from(tracks)) {
    if (track.mode === "showing" && track.activeCues && track.activeCues.length) {
      const cue = track.activeCues[0];
      return { text: cue.text, start: cue.startTime, end: cue.endTime };
    }
  }
  return null;
}

const player = { engine: params.get("player"), errors, audio: () => [], setAudio: () => {},
  subtitles: () => [], setSubtitle: () => {}, cue: () => showingCue(video.textTracks) };
window.mirrorPlayer = player;

async function startShaka() {
  shaka.polyfill.installAll();
  const shakaPlayer = new shaka.Player();
  window.shakaPlayer = shakaPlayer;
  shakaPlayer.addEventListener("error", (event) => {
    if (event.detail.severity === shaka.util.Error.Severity.CRITICAL) fail("shaka " + event.detail.code);
  });
  // Shaka 5 parses a WebVTT segment only once a video segment is appended after the text
  // stream is chosen (shaka-player PR 9676): chosen after the whole of a short item is
  // buffered, it never shows a cue. So the language is chosen before loading (`?text=`).
  const text = params.get("text");
  if (text) shakaPlayer.configure({ preferredText: [{ language: text }] });
  await shakaPlayer.attach(video);
  await shakaPlayer.load(master);
  player.audio = () => shakaPlayer.getAudioTracks().map((t) => ({ name: t.label, language: t.language, active: t.active, channels: t.channelsCount }));
  player.setAudio = (i) => { shakaPlayer.selectAudioTrack(shakaPlayer.getAudioTracks()[i]); };
  player.subtitles = () => shakaPlayer.getTextTracks().map((t) => ({ name: t.label, language: t.language, active: t.active }));
  // Shaka 5 shows the track it selects (setTextTrackVisibility is gone).
  player.setSubtitle = (i) => { shakaPlayer.selectTextTrack(shakaPlayer.getTextTracks()[i] || null); };
  status.textContent = "shaka " + shaka.Player.version;
}

function startVideojs() {
  const vjs = videojs(video, { html5: { vhs: { overrideNative: true }, nativeAudioTracks: false, nativeVideoTracks: false } });
  window.vjsPlayer = vjs;
  vjs.on("error", () => fail("video.js " + JSON.stringify(vjs.error())));
  const list = (tracks) => Array.from({ length: tracks.length }, (_, i) => tracks[i]);
  const texts = () => list(vjs.textTracks()).filter((t) => t.kind === "subtitles" || t.kind === "captions");
  player.audio = () => list(vjs.audioTracks()).map((t) => ({ name: t.label, language: t.language, active: t.enabled }));
  player.setAudio = (i) => { list(vjs.audioTracks()).forEach((t, n) => { t.enabled = n === i; }); };
  player.subtitles = () => texts().map((t) => ({ name: t.label, language: t.language, active: t.mode === "showing" }));
  player.setSubtitle = (i) => { texts().forEach((t, n) => { t.mode = n === i ? "showing" : "disabled"; }); };
  player.cue = () => showingCue(vjs.textTracks());
  vjs.src({ src: master, type: "application/x-mpegURL" });
  status.textContent = "video.js " + videojs.VERSION;
}

(player.engine === "shaka" ? startShaka() : Promise.resolve().then(startVideojs)).catch(
  (error) => fail((error && (error.code || error.message)) || error),
);
