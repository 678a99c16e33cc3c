// The player page (mirror/web/player.py): a served file, the CSP allows no inline script.
"use strict";
const video = document.getElementById("video");
// The item's master playlist, served by `mirror serve` with presigned media URIs.
const master = video.dataset.master;
const audioSelect = document.getElementById("audio");
const subtitleSelect = document.getElementById("subtitles");
const status = document.getElementById("status");
const forced = new URLSearchParams(location.search).get("engine");
// Native HLS where it is complete (Safari: audio and subtitle renditions) or the only way
// (no MSE, older iOS); hls.js elsewhere. Chromium's native HLS (141+) plays and switches
// audio tracks but lists no SUBTITLES renditions, so Chromium gets hls.js.
const nativeHls = video.canPlayType("application/vnd.apple.mpegurl") !== "";
const hlsjs = typeof Hls !== "undefined" && Hls.isSupported();
const apple = navigator.vendor === "Apple Computer, Inc.";
const engine = forced || (nativeHls && (apple || !hlsjs) ? "native" : "hls.js");

function say(text, error) {
  status.textContent = text;
  status.className = error ? "error" : "";
}

function fill(select, tracks, active, keep) {
  select.querySelectorAll("option").forEach((o) => { if (o.value !== keep) o.remove(); });
  tracks.forEach((track, i) => {
    const option = new Option(track.name + (track.language ? " (" + track.language + ")" : ""), String(i));
    option.selected = i === active;
    select.add(option);
  });
}

// One small API over both engines: the page's selects use it, and so do the browser tests.
const player = { engine, audio: () => [], setAudio: () => {}, subtitles: () => [], setSubtitle: () => {} };
window.mirrorPlayer = player;

if (engine === "hls.js") {
  const hls = new Hls({ renderTextTracksNatively: true });
  player.audio = () => hls.audioTracks.map((t, i) => ({ name: t.name, language: t.lang, active: i === hls.audioTrack }));
  player.setAudio = (i) => { hls.audioTrack = i; };
  player.subtitles = () => hls.subtitleTracks.map((t, i) => ({ name: t.name, language: t.lang, active: i === hls.subtitleTrack }));
  player.setSubtitle = (i) => { hls.subtitleTrack = i; hls.subtitleDisplay = i >= 0; };
  // The menus follow hls.js's track lists and switches, whoever asked for the switch.
  hls.on(Hls.Events.MANIFEST_PARSED, () => say("hls.js " + Hls.version));
  hls.on(Hls.Events.AUDIO_TRACKS_UPDATED, () => fill(audioSelect, player.audio(), hls.audioTrack, null));
  hls.on(Hls.Events.SUBTITLE_TRACKS_UPDATED, () => fill(subtitleSelect, player.subtitles(), hls.subtitleTrack, "-1"));
  hls.on(Hls.Events.AUDIO_TRACK_SWITCHED, (_, data) => { audioSelect.value = String(data.id); });
  hls.on(Hls.Events.SUBTITLE_TRACK_SWITCH, (_, data) => { subtitleSelect.value = String(data.id); });
  hls.on(Hls.Events.ERROR, (_, data) => { if (data.fatal) say("playback failed: " + data.details, true); });
  hls.loadSource(master);
  hls.attachMedia(video);
} else {
  const tracks = () => Array.from(video.audioTracks || []);
  const texts = () => Array.from(video.textTracks).filter((t) => t.kind === "subtitles" || t.kind === "captions");
  player.audio = () => tracks().map((t) => ({ name: t.label, language: t.language, active: t.enabled }));
  player.setAudio = (i) => { tracks().forEach((t, n) => { t.enabled = n === i; }); };
  player.subtitles = () => texts().map((t) => ({ name: t.label, language: t.language, active: t.mode === "showing" }));
  player.setSubtitle = (i) => { texts().forEach((t, n) => { t.mode = n === i ? "showing" : "disabled"; }); };
  video.addEventListener("loadedmetadata", () => {
    fill(audioSelect, player.audio(), player.audio().findIndex((t) => t.active), null);
    fill(subtitleSelect, player.subtitles(), -1, "-1");
    say("native HLS");
  });
  video.addEventListener("error", () => say("playback failed: " + (video.error && video.error.message), true));
  video.src = master;
}
audioSelect.addEventListener("change", () => player.setAudio(Number(audioSelect.value)));
subtitleSelect.addEventListener("change", () => player.setSubtitle(Number(subtitleSelect.value)));

// Scrubbing thumbnails: the item's WebVTT thumbnails track (cues `<sheet URL>#xywh=x,y,w,h`,
// sheets presigned by `mirror serve`); hovering the seek bar shows the thumbnail of the
// time under the pointer, a click seeks there. No track (404): no seek bar.
const seek = document.getElementById("seek");
const played = document.getElementById("seek-played");
const thumbnail = document.getElementById("thumbnail");
const thumbnailTime = document.getElementById("thumbnail-time");
let cues = [];

function seconds(stamp) {
  const parts = stamp.split(":").map(Number);
  return parts.reduce((total, part) => total * 60 + part, 0);
}

function parseThumbnails(text) {
  const found = [];
  for (const block of text.replace(/\r/g, "").split(/\n\n+/)) {
    const lines = block.split("\n");
    const at = lines.findIndex((line) => line.includes("-->"));
    if (at < 0 || !lines[at + 1]) continue;
    const [start, end] = lines[at].split("-->").map((s) => seconds(s.trim()));
    const hash = lines[at + 1].lastIndexOf("#xywh=");
    if (hash < 0) continue;
    const [x, y, w, h] = lines[at + 1].slice(hash + 6).split(",").map(Number);
    found.push({ start, end, url: lines[at + 1].slice(0, hash), x, y, w, h });
  }
  return found;
}

function clock(t) {
  const s = Math.floor(t % 60).toString().padStart(2, "0");
  const m = Math.floor(t / 60) % 60;
  const h = Math.floor(t / 3600);
  return (h ? h + ":" + String(m).padStart(2, "0") : String(m)) + ":" + s;
}

// The cue showing at `t` seconds (the last one for times past the end), or null.
player.thumbnailAt = (t) => cues.find((c) => t >= c.start && t < c.end) || (cues.length && t >= cues[cues.length - 1].start ? cues[cues.length - 1] : null);
player.thumbnails = () => cues.length;

function timeAt(event) {
  const box = seek.getBoundingClientRect();
  const fraction = Math.min(1, Math.max(0, (event.clientX - box.left) / box.width));
  const duration = Number.isFinite(video.duration) ? video.duration : (cues.length ? cues[cues.length - 1].end : 0);
  return { fraction, time: fraction * duration };
}

seek.addEventListener("mousemove", (event) => {
  const { fraction, time } = timeAt(event);
  const cue = player.thumbnailAt(time);
  if (!cue) { thumbnail.hidden = true; return; }
  thumbnail.style.width = cue.w + "px";
  thumbnail.style.height = cue.h + "px";
  thumbnail.style.backgroundImage = 'url("' + cue.url.replace(/"/g, "%22") + '")';
  thumbnail.style.backgroundPosition = -cue.x + "px " + -cue.y + "px";
  thumbnail.style.left = fraction * 100 + "%";
  thumbnailTime.textContent = clock(time);
  thumbnail.hidden = false;
});
seek.addEventListener("mouseleave", () => { thumbnail.hidden = true; });
seek.addEventListener("click", (event) => { video.currentTime = timeAt(event).time; });
video.addEventListener("timeupdate", () => {
  if (video.duration) played.style.width = (100 * video.currentTime) / video.duration + "%";
});

fetch(master.replace(/master\.m3u8$/, "thumbnails/thumbnails.vtt"))
  .then((response) => (response.ok ? response.text() : ""))
  .then((text) => {
    cues = text ? parseThumbnails(text) : [];
    seek.hidden = cues.length === 0;
  })
  .catch(() => { seek.hidden = true; });
