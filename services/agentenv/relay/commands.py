"""Every CDP command of the shipped Chromium, classified (docs/spec.md section 2).

The first version kept an allowlist of what four clients' recorded traffic
held, and every other client hit a wall that protected nothing: Stagehand's
``DOM.enable``, Playwright tracing's ``Page.startScreencast``,
chrome-devtools-mcp's ``Tracing.*`` and ``HeapProfiler.*``, Selenium's
``Network.setCookie``. A refusal must name a danger, not an absence. Now each
command of the pinned protocol (:data:`agentenv.relay.pinned.COMMANDS`) is
one of:

- ``allowed``: a client may do it on its pages as on its own Chromium;
- ``confined``: allowed, with its parameters checked or held to what the
  agent may reach (:data:`agentenv.relay.guard.PARAMS` has its check):
  URLs, file paths, browser contexts, targets, and settings that would
  apply to the whole browser when sent without a session;
- ``refused``, with the reason, from the threat model: it escapes the record
  (extensions, a CDP channel around the relay, DevTools windows), reaches
  the browser process or the machine (close, crash, command line, files,
  ports, the desktop), or changes the browser for every agent at once
  (rule ``browser-wide``).

A domain's default covers each of its commands in the pinned list, and
:data:`EXCEPTIONS` names the commands that differ. A command the pinned
list does not hold (a newer Chromium's, or a typo) is refused as
``unclassified``, and the test of the image fails until it is looked at.

The same table says what each command does to the record (docs/spec.md section
1, "Acting or reading"): :data:`READING_COMMANDS` names, domain by domain, the
commands that cannot change any page, its pixels, its network or its
storage; :data:`ACTING_COMMANDS` names every other one of the pinned list.
Every command is named in one of the two (a test fails on one named in
neither), and a command named in neither acts: its line keeps its params
(redacted), it is the latest act of its tab, and a recording frames after
it. Code an agent runs is acting, wherever it runs (``Runtime.compileScript``,
a breakpoint's condition, ``Debugger.evaluateOnCallFrame``, scripts added on
load); so is whatever draws over the page (``Overlay.*`` highlights, find
in page) or moves it (``DOM.scrollIntoViewIfNeeded``). Each command also
carries the names of the parameters it takes (:data:`agentenv.relay.pinned.PARAMS`):
the log keeps only the size of others.

Wherever a command is allowed, the relay's other rules still hold: the
relay's own worlds are never reached (:mod:`agentenv.relay.worlds`),
typing is checked for password fields, and secrets in parameters never reach
the log (:mod:`agentenv.log.redact`).

What "its pages" means: with users configured, every agent is in the same
browser context until scopes land (issue 21); the table is written for a
scope, and the settings that have no per-context form are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from agentenv.protocol.log import ACTING, READING, Acts
from agentenv.relay.pinned import CHROMIUM, COMMANDS, PARAMS

__all__ = [
    "ACTING_COMMANDS",
    "ACTING_WITH",
    "ALLOWED",
    "BROWSER_LEVEL",
    "CONFINED",
    "DOMAINS",
    "EXCEPTIONS",
    "READING_COMMANDS",
    "REFUSED",
    "Command",
    "Standing",
    "acts",
    "classify",
]

Standing = Literal["allowed", "confined", "refused"]
ALLOWED: Standing = "allowed"
CONFINED: Standing = "confined"
REFUSED: Standing = "refused"


@dataclass(frozen=True)
class Command:
    kind: Standing
    #: Why it may pass, what is checked, or the danger it is refused for.
    why: str
    #: The guard's rule for a refusal.
    rule: str = "not-allowed"
    #: What its log line says it did (:data:`READING`; acting by default).
    acts: Acts = ACTING
    #: The names of the parameters it takes (None: not in the pinned
    #: protocol, so every one is kept).
    params: frozenset[str] | None = None


def _allowed(why: str) -> Command:
    return Command(ALLOWED, why)


def _confined(why: str) -> Command:
    return Command(CONFINED, why)


#: Storage calls with no context of their own: on the browser's own session
#: Chromium runs them on its default context (the home scope's).
_DEFAULT_CONTEXT_STORAGE = tuple(
    f"Storage.{name}"
    for name in (
        "clearDataForOrigin",
        "clearDataForStorageKey",
        "getUsageAndQuota",
        "trackCacheStorageForOrigin",
        "trackCacheStorageForStorageKey",
        "trackIndexedDBForOrigin",
        "trackIndexedDBForStorageKey",
        "untrackCacheStorageForOrigin",
        "untrackCacheStorageForStorageKey",
        "untrackIndexedDBForOrigin",
        "untrackIndexedDBForStorageKey",
        "getTrustTokens",
        "clearTrustTokens",
        "setStorageBucketTracking",
        "deleteStorageBucket",
    )
)


def _refused(why: str, rule: str = "not-allowed") -> Command:
    return Command(REFUSED, why, rule)


def _browser_wide(why: str) -> Command:
    return Command(REFUSED, why, "browser-wide")


_PAGE = "reads or changes the agent's own pages, as DevTools does"

#: domain -> what every command of the domain in the pinned list is.
DOMAINS: dict[str, Command] = {
    "Accessibility": _allowed("reads the page's accessibility tree (Puppeteer's aria/ selectors)"),
    "Ads": _allowed("reads the page's ad metrics"),
    "Animation": _allowed(_PAGE),
    "Audits": _allowed("reads the page's issues and its responses' encodings"),
    "Autofill": _allowed("fills the page's forms with data the agent gives (withheld in the log)"),
    "BackgroundService": _allowed("observes the page's background services"),
    "BluetoothEmulation": _browser_wide(
        "replaces the Bluetooth adapter of the whole browser with a simulated one"
    ),
    "Browser": _refused("the browser process itself"),
    "CSS": _allowed(_PAGE),
    "CacheStorage": _allowed("the page's origin's caches"),
    "Cast": _refused("sends a tab or the computer's desktop to another device on the network"),
    "Console": _allowed("the page's console"),
    "CrashReportContext": _allowed("reads the page's crash report context"),
    "DOM": _allowed(_PAGE + " (Stagehand's locators need DOM.enable)"),
    "DOMDebugger": _allowed("breakpoints in the agent's own pages"),
    "DOMSnapshot": _allowed("reads the page"),
    "DOMStorage": _allowed("the page's origin's storage (values withheld in the log)"),
    "Debugger": _allowed(
        "debugs the agent's own pages (the relay's world is never reached: worlds.py)"
    ),
    "DeviceAccess": _allowed("answers the page's device prompts"),
    "DeviceOrientation": _allowed("emulates the page's device orientation"),
    "DigitalCredentials": _allowed("a virtual wallet for the page's credential requests"),
    "Emulation": _allowed("emulation of the agent's own page"),
    "EventBreakpoints": _allowed("breakpoints in the agent's own pages"),
    "Extensions": _refused("an extension acts in the browser without passing the relay"),
    "FedCm": _allowed("answers the page's identity dialogs"),
    "Fetch": _allowed("the agent's own pages' requests (routes, authentication)"),
    "FileSystem": _allowed("reads the page's origin's file system buckets"),
    "FindInPage": _allowed("finds text in the page"),
    "HeadlessExperimental": _allowed("frame control of the agent's own page"),
    "HeapProfiler": _allowed("the heap of the agent's page (chrome-devtools-mcp's heap snapshot)"),
    "IO": _allowed("reads streams the agent was handed (traces, PDFs)"),
    "IndexedDB": _allowed("the page's origin's databases"),
    "Input": _allowed("input to the agent's page (coordinates kept within range)"),
    "Inspector": _allowed("the page's inspector events"),
    "LayerTree": _allowed("reads the page's compositing layers"),
    "Log": _allowed("the page's log"),
    "Media": _allowed("the page's media events"),
    "Memory": _allowed("the memory of the agent's page"),
    "Network": _allowed("the agent's own pages' network"),
    "Overlay": _allowed("draws on the agent's page, as DevTools does"),
    "PWA": _refused("installs and launches apps on the machine"),
    "Page": _allowed(_PAGE),
    "Performance": _allowed("reads the page's metrics"),
    "PerformanceTimeline": _allowed("reads the page's performance timeline"),
    "Preload": _allowed("the page's preloading events"),
    "Profiler": _allowed("profiles the agent's own page"),
    "Runtime": _allowed(
        "runs script in the agent's own pages (the relay's world is never reached: worlds.py)"
    ),
    "Schema": _allowed("lists the protocol's domains"),
    "Security": _allowed("the page's security state"),
    "ServiceWorker": _allowed("the service workers of the agent's pages"),
    "SmartCardEmulation": _browser_wide("replaces the smart card reader of the whole browser"),
    "Storage": _allowed("the storage and cookies of the agent's pages"),
    "SystemInfo": _allowed("reads the GPU and features of the machine Chromium sees"),
    "Target": _allowed("lists and attaches to the agent's targets"),
    "Tethering": _refused("forwards the computer's ports to the client"),
    "Tracing": _allowed("traces the agent's page (chrome-devtools-mcp's performance traces)"),
    "WebAudio": _allowed("reads the page's audio graph"),
    "WebAuthn": _allowed("virtual authenticators for the page (credentials withheld in the log)"),
    "WebMCP": _allowed("the page's own tools"),
}

#: Commands that differ from their domain's default.
EXCEPTIONS: dict[str, Command] = {
    # Browser: the process itself stays closed; windows, versions,
    # permissions and downloads are an agent's.
    "Browser.getVersion": _allowed("versions"),
    "Browser.getWindowForTarget": _allowed("the window of the agent's tab"),
    "Browser.getWindowBounds": _allowed("a window's size"),
    "Browser.setWindowBounds": _allowed("a window's size (Playwright viewport: null)"),
    "Browser.setContentsSize": _allowed("a tab's size (chrome-devtools-mcp resize_page)"),
    "Browser.setDownloadBehavior": _confined("downloads go to the downloads folder only"),
    "Browser.cancelDownload": _allowed("Playwright download.cancel"),
    "Browser.grantPermissions": _confined("the usual permissions; never the local network"),
    "Browser.setPermission": _confined("the usual permissions; never the local network"),
    "Browser.resetPermissions": _allowed("Playwright context.clear_permissions"),
    "Browser.getGlobalPrivacyControl": _allowed("reads the privacy control"),
    "Browser.setGlobalPrivacyControl": _browser_wide("the privacy control of the whole browser"),
    "Browser.addMockCamera": _browser_wide("a camera in the whole browser's device list"),
    "Browser.addPrivacySandboxEnrollmentOverride": _browser_wide(
        "privacy sandbox enrollment of the whole browser"
    ),
    "Browser.getHistograms": _browser_wide("the whole browser's metrics, every agent's pages"),
    "Browser.getHistogram": _browser_wide("the whole browser's metrics, every agent's pages"),
    "Browser.close": _refused("closes the browser under every agent"),
    "Browser.crash": _refused("crashes the browser under every agent"),
    "Browser.crashGpuProcess": _refused("crashes the GPU process under every agent"),
    "Browser.getBrowserCommandLine": _refused("the browser process's command line"),
    "Browser.executeBrowserCommand": _refused("runs the browser's own UI commands"),
    "Browser.setDockTile": _refused("the machine's dock"),
    # Target: the agent's targets; never a channel around the relay.
    "Target.attachToTarget": _confined("flattened sessions on web targets only"),
    "Target.autoAttachRelated": _confined("web targets only"),
    "Target.activateTarget": _confined("web targets only"),
    "Target.closeTarget": _confined("web targets only"),
    "Target.createTarget": _confined("a plain tab at a web URL"),
    "Target.createBrowserContext": _confined("no proxy, no universal network access"),
    "Target.setAutoAttach": _confined("never the browser's own UI"),
    # Playwright opens every CDP session through it (new_cdp_session,
    # new_browser_cdp_session). The session has the browser's own session's
    # powers, and the relay serves it exactly so: the same table, the same
    # scope (Target.* kept to it, its events filtered), the same record.
    "Target.attachToBrowserTarget": _confined(
        "from the browser's own session only; served as that session is (relay.core)"
    ),
    "Target.exposeDevToolsProtocol": _refused("a CDP channel for a page, around the relay"),
    "Target.sendMessageToTarget": _refused("unflattened sessions, around the relay and its log"),
    "Target.setRemoteLocations": _refused("connections to other hosts"),
    "Target.openDevTools": _refused("a DevTools window: CDP around the relay"),
    # Page.
    "Page.navigate": _confined("web URLs only"),
    "Page.setDownloadBehavior": _confined("downloads go to the downloads folder only"),
    "Page.crash": _refused("crashes the renderer, and every tab that shares its process"),
    "Page.setRPHRegistrationMode": _browser_wide(
        "registers protocol handlers for the whole browser"
    ),
    "Page.setSPCTransactionMode": _browser_wide("payment confirmation for the whole browser"),
    # Network, Fetch, Security: confined when they would reach past the page.
    # Lighthouse and DevTools fetch source maps and robots.txt this way: a
    # web URL in the frame's own network context, as the page could fetch it.
    "Network.loadNetworkResource": _confined("web URLs only: file: and local pages are not"),
    "Network.setCookieControls": _browser_wide("third-party cookie controls of the whole browser"),
    "Fetch.enable": _confined("a session's requests; without one, every agent's: browser-wide"),
    "Fetch.continueRequest": _confined("a changed URL is refused: the request's own only"),
    "Security.setIgnoreCertificateErrors": _confined(
        "on a page's session; without one, with two scopes or more, the relay keeps it "
        "to the sender's own pages and frames (relay.core)"
    ),
    "Security.setOverrideCertificateErrors": _confined(
        "on a page's session; without one, the whole browser's: browser-wide"
    ),
    "Tracing.start": _confined(
        "on a page's session, with Chromium's own backend; never a raw perfetto config"
    ),
    # Input and DOM: files from the downloads folder only.
    "DOM.setFileInputFiles": _confined("files from the downloads folder only"),
    "Input.dispatchDragEvent": _confined("files from the downloads folder only"),
    "Input.dispatchMouseEvent": _confined("coordinates within range"),
    "Input.dispatchTouchEvent": _confined("coordinates within range"),
    "Input.emulateTouchFromMouseEvent": _confined("coordinates within range"),
    "Input.synthesizeScrollGesture": _confined("coordinates within range"),
    "Input.synthesizePinchGesture": _confined("coordinates within range"),
    "Input.synthesizeTapGesture": _confined("coordinates within range"),
    # Debugger: a condition runs in every script its pattern matches.
    "Debugger.setBreakpointByUrl": _confined("a condition needs an exact url"),
    # Emulation: the headless screens are the whole browser's.
    "Emulation.addScreen": _browser_wide("the screens of the whole browser"),
    "Emulation.updateScreen": _browser_wide("the screens of the whole browser"),
    "Emulation.removeScreen": _browser_wide("the screens of the whole browser"),
    "Emulation.setPrimaryScreen": _browser_wide("the screens of the whole browser"),
    # Memory: the browser process's own, or every renderer's.
    "Memory.getAllTimeSamplingProfile": _refused("the browser process's heap"),
    "Memory.getBrowserSamplingProfile": _refused("the browser process's heap"),
    "Memory.setPressureNotificationsSuppressed": _browser_wide(
        "memory pressure of the whole browser"
    ),
    "Memory.simulatePressureNotification": _browser_wide("memory pressure of the whole browser"),
    # Storage: the profile's budget and its shared state.
    "Storage.overrideQuotaForOrigin": _refused(
        "lifts an origin's quota past the profile's share of the computer's disk"
    ),
    "Storage.runBounceTrackingMitigations": _browser_wide(
        "deletes state of sites across the whole profile"
    ),
    "SystemInfo.getProcessInfo": _refused("lists every process of the browser, every agent's"),
    # A page's storage on its session; on the browser's own session these
    # reach Chromium's default context (the home scope's), whoever sends them.
    **{
        name: _confined(
            "a page's storage on its session; on the browser's own session, the home scope's"
        )
        for name in _DEFAULT_CONTEXT_STORAGE
    },
    "Emulation.setAutomationOverride": _confined(
        "a page's on its session; on the browser's own session, every scope's pages"
    ),
}

#: Confined commands that are refused (``browser-wide``) when sent on the
#: browser's own session (no session on the browser endpoint) of a computer
#: with two scopes or more: there they apply to every scope's pages at once
#: (with one scope there is no other to reach). The relay's core answers
#: ``Security.setIgnoreCertificateErrors`` there itself, kept to the
#: sender's pages (Puppeteer's ``acceptInsecureCerts`` sends it at connect);
#: it stays listed so that it fails closed should it ever get this far.
BROWSER_LEVEL = frozenset(
    {
        "Fetch.enable",
        "Security.setIgnoreCertificateErrors",
        "Security.setOverrideCertificateErrors",
        "Tracing.start",
        "Emulation.setAutomationOverride",
        *_DEFAULT_CONTEXT_STORAGE,
    }
)


def _names(domain: str, names: str) -> frozenset[str]:
    return frozenset(f"{domain}.{name}" for name in names.split())


#: domain -> its commands that only read: none of them can change any page,
#: its pixels, its network or its storage (what they start or stop is the
#: agent's own view: events, tracking, sampling, snapshots).
_READING: dict[str, str] = {
    "Accessibility": "disable enable getAXNodeAndAncestors getChildAXNodes getFullAXTree "
    "getPartialAXTree getRootAXNode queryAXTree",
    "Ads": "getAdMetrics getAdScripts",
    "Animation": "enable getCurrentTime getPlaybackRate resolveAnimation",
    "Audits": "checkFormsIssues disable enable getEncodedResponse",
    "Autofill": "disable enable",
    "BackgroundService": "setRecording startObserving stopObserving",
    "Browser": "getBrowserCommandLine getGlobalPrivacyControl getHistogram getHistograms "
    "getVersion getWindowBounds getWindowForTarget",
    "CSS": "collectClassNames enable getAnimatedStylesForNode getBackgroundColors "
    "getComputedStyleForNode getEnvironmentVariables getInlineStylesForNode getLayersForNode "
    "getLocationForSelector getLonghandProperties getMatchedStylesForNode getMediaQueries "
    "getPlatformFontsForNode getStyleSheetText resolveValues startRuleUsageTracking "
    "stopRuleUsageTracking takeComputedStyleUpdates takeCoverageDelta trackComputedStyleUpdates "
    "trackComputedStyleUpdatesForNode",
    "CacheStorage": "requestCacheNames requestCachedResponse requestEntries",
    "Console": "clearMessages disable enable",
    "CrashReportContext": "getEntries",
    "DOM": "collectClassNamesFromSubtree describeNode discardSearchResults enable getAnchorElement "
    "getAttributes getBoxModel getContainerForNode getContentQuads getDetachedDomNodes getDocument "
    "getElementByRelation getFileInfo getFlattenedDocument getFrameOwner "
    "getImplicitAnchorCandidates getNodeForLocation getNodeStackTraces getNodesForSubtreeByStyle "
    "getOuterHTML getQueryingDescendantsForContainer getRelayoutBoundary getSearchResults "
    "getTopLayerElements markUndoableState performSearch pushNodeByPathToFrontend "
    "pushNodesByBackendIdsToFrontend querySelector querySelectorAll requestChildNodes requestNode "
    "resolveNode setInspectedNode setNodeStackTracesEnabled",
    "DOMDebugger": "getEventListeners",
    "DOMSnapshot": "captureSnapshot disable enable getSnapshot",
    "DOMStorage": "disable enable getDOMStorageItems",
    "Debugger": "disassembleWasmModule enable getPossibleBreakpoints getScriptSource "
    "getStackTrace getWasmBytecode nextWasmDisassemblyChunk searchInContent "
    "setAsyncCallStackDepth setBlackboxExecutionContexts setBlackboxPatterns "
    "setBlackboxedRanges",
    "DeviceAccess": "disable enable",
    "Emulation": "canEmulate getOverriddenSensorInformation getScreenInfos",
    "Extensions": "getExtensions getStorageItems",
    "FedCm": "disable enable",
    "Fetch": "getResponseBody takeResponseBodyAsStream",
    "FileSystem": "getDirectory",
    "HeadlessExperimental": "disable enable",
    "HeapProfiler": "addInspectedHeapObject disable enable getHeapObjectId getObjectByHeapObjectId "
    "getSamplingProfile startSampling stopSampling",
    "IO": "close read resolveBlob",
    "IndexedDB": "disable enable getMetadata requestData requestDatabase requestDatabaseNames",
    "Inspector": "disable enable",
    "LayerTree": "compositingReasons disable enable loadSnapshot makeSnapshot profileSnapshot "
    "releaseSnapshot replaySnapshot snapshotCommandLog",
    "Log": "clear disable enable startViolationsReport stopViolationsReport",
    "Media": "disable enable",
    "Memory": "getAllTimeSamplingProfile getBrowserSamplingProfile getDOMCounters "
    "getSamplingProfile startSampling stopSampling",
    "Network": "canClearBrowserCache canClearBrowserCookies canEmulateNetworkConditions "
    "configureDurableMessages enable enableDeviceBoundSessions enableReportingApi "
    "fetchSchemefulSite getAllCookies getCertificate getCookies getRequestPostData getResponseBody "
    "getSecurityIsolationStatus searchInResponseBody setAttachDebugStack streamResourceContent",
    "Overlay": "enable getGridHighlightObjectsForTest getHighlightObjectForTest "
    "getSourceOrderHighlightObjectForTest",
    "PWA": "getOsAppState",
    "Page": "captureScreenshot captureSnapshot createIsolatedWorld enable getAdScriptAncestry "
    "getAnnotatedPageContent getAppId getAppManifest getFrameTree getInstallabilityErrors "
    "getLayoutMetrics getManifestIcons getNavigationHistory getOriginTrials "
    "getPermissionsPolicyState getResourceContent getResourceTree getSiblingSubApps getSubApps "
    "screencastFrameAck searchInResource setLifecycleEventsEnabled startScreenRecording "
    "startScreencast stopScreenRecording stopScreencast",
    "Performance": "disable enable getMetrics setTimeDomain",
    "PerformanceTimeline": "enable",
    "Preload": "disable enable",
    "Profiler": "disable enable getBestEffortCoverage setSamplingInterval start "
    "startPreciseCoverage stop stopPreciseCoverage takePreciseCoverage",
    # runIfWaitingForDebugger lets a new target go on as it would have
    # without a debugger (the client's own waitForDebuggerOnStart held it).
    "Runtime": "awaitPromise discardConsoleEntries enable getExceptionDetails getHeapUsage "
    "getIsolateId getProperties globalLexicalScopeNames queryObjects releaseObject "
    "releaseObjectGroup runIfWaitingForDebugger setAsyncCallStackDepth "
    "setCustomObjectFormatterEnabled setMaxCallStackSizeToCapture",
    "Schema": "getDomains",
    "Security": "enable",
    "ServiceWorker": "disable enable",
    "Storage": "getCookies getPrivateVerificationTokens "
    "getPrivateVerificationTokensIssuerConfigs getStorageKey getStorageKeyForFrame "
    "getTrustTokens getUsageAndQuota setPrivateVerificationTokensTracking "
    "setStorageBucketTracking trackCacheStorageForOrigin trackCacheStorageForStorageKey "
    "trackIndexedDBForOrigin trackIndexedDBForStorageKey untrackCacheStorageForOrigin "
    "untrackCacheStorageForStorageKey untrackIndexedDBForOrigin untrackIndexedDBForStorageKey",
    "SystemInfo": "getFeatureState getInfo getProcessInfo",
    "Target": "attachToBrowserTarget attachToTarget getBrowserContexts getDevToolsTarget "
    "getTargetInfo getTargets setDiscoverTargets",
    "Tracing": "end getCategories getTrackEventDescriptor recordClockSyncMarker "
    "requestMemoryDump start",
    "WebAudio": "disable enable getRealtimeData",
    "WebAuthn": "getCredential getCredentials",
    "WebMCP": "disable enable",
}

#: domain -> its commands that act (every one of the pinned list that is
#: not in :data:`_READING`, named: a command named in neither fails a test).
#: A domain's ``disable`` acts where it drops what its session set on the
#: page (blocked URLs, highlights, forced states, bindings), and so does a
#: session's detaching (its emulation goes: the page resizes).
_ACTING: dict[str, str] = {
    "Animation": "disable releaseAnimations seekAnimations setPaused setPlaybackRate setTiming",
    "Autofill": "setAddresses trigger",
    "BackgroundService": "clearEvents",
    "BluetoothEmulation": "addCharacteristic addDescriptor addService disable enable "
    "removeCharacteristic removeDescriptor removeService setSimulatedCentralState "
    "simulateAdvertisement simulateCharacteristicOperationResponse "
    "simulateDescriptorOperationResponse simulateGATTDisconnection "
    "simulateGATTOperationResponse simulatePreconnectedPeripheral",
    "Browser": "addMockCamera addPrivacySandboxEnrollmentOverride cancelDownload close crash "
    "crashGpuProcess executeBrowserCommand grantPermissions resetPermissions setContentsSize "
    "setDockTile setDownloadBehavior setGlobalPrivacyControl setPermission setWindowBounds",
    "CSS": "addRule createStyleSheet disable forcePseudoState forceStartingStyle "
    "setContainerQueryConditionText setContainerQueryText setEffectivePropertyValueForNode "
    "setKeyframeKey setLocalFontsEnabled setMediaText setNavigationText "
    "setPropertyRulePropertyName setRuleSelector setScopeText setStyleSheetText setStyleTexts "
    "setSupportsText",
    "CacheStorage": "deleteCache deleteEntry",
    "Cast": "disable enable setSinkToUse startDesktopMirroring startTabMirroring stopCasting",
    # Text markers and highlights draw over the page; scrolling moves it.
    "DOM": "clearTextMarkers copyTo disable focus forceShowInterest forceShowPopover hideHighlight "
    "highlightNode highlightRect moveTo redo removeAttribute removeNode scrollIntoViewIfNeeded "
    "setAttributeValue setAttributesAsText setFileInputFiles setNodeName setNodeValue setOuterHTML "
    "setTextMarker undo",
    # A breakpoint stops the page's script where the agent chose.
    "DOMDebugger": "removeDOMBreakpoint removeEventListenerBreakpoint "
    "removeInstrumentationBreakpoint removeXHRBreakpoint setBreakOnCSPViolation "
    "setDOMBreakpoint setEventListenerBreakpoint setInstrumentationBreakpoint setXHRBreakpoint",
    "DOMStorage": "clear removeDOMStorageItem setDOMStorageItem",
    # Conditions and evaluateOnCallFrame run code; pauses, steps and
    # resumes decide when the page's own code runs.
    "Debugger": "continueToLocation disable evaluateOnCallFrame pause pauseOnAsyncCall "
    "removeBreakpoint restartFrame resume setBreakpoint setBreakpointByUrl "
    "setBreakpointOnFunctionCall setBreakpointsActive setInstrumentationBreakpoint "
    "setPauseOnExceptions setReturnValue setScriptSource setSkipAllPauses setVariableValue "
    "stepInto stepOut stepOver",
    "DeviceAccess": "cancelPrompt selectPrompt",
    "DeviceOrientation": "clearDeviceOrientationOverride setDeviceOrientationOverride",
    "DigitalCredentials": "setVirtualWalletBehavior",
    "Emulation": "addScreen clearDeviceMetricsOverride clearDevicePostureOverride "
    "clearDisplayFeaturesOverride clearGeolocationOverride clearIdleOverride removeScreen "
    "resetPageScaleFactor setAutoDarkModeOverride setAutomationOverride "
    "setCPUPerformanceOverride setCPUThrottlingRate setDataSaverOverride "
    "setDefaultBackgroundColorOverride setDeviceMetricsOverride setDevicePostureOverride "
    "setDisabledImageTypes setDisplayFeaturesOverride setDocumentCookieDisabled "
    "setEmitTouchEventsForMouse setEmulatedMedia setEmulatedOSTextScale "
    "setEmulatedVisionDeficiency setFocusEmulationEnabled setGeolocationOverride "
    "setHardwareConcurrencyOverride setIdleOverride setLocaleOverride setNavigatorOverrides "
    "setPageScaleFactor setPressureSourceOverrideEnabled setPressureStateOverride "
    "setPrimaryScreen setSafeAreaInsetsOverride setScriptExecutionDisabled "
    "setScrollbarsHidden setSensorOverrideEnabled setSensorOverrideReadings "
    "setSmallViewportHeightDifferenceOverride setTimezoneOverride setTouchEmulationEnabled "
    "setUserAgentOverride setVirtualKeyboardGeometryOverride setVirtualTimePolicy "
    "setVisibleSize updateScreen",
    "EventBreakpoints": "disable removeInstrumentationBreakpoint setInstrumentationBreakpoint",
    "Extensions": "clearStorageItems loadUnpacked removeStorageItems setStorageItems "
    "triggerAction uninstall",
    "FedCm": "clickDialogButton dismissDialog openUrl resetCooldown selectAccount",
    "Fetch": "continueRequest continueResponse continueWithAuth disable enable failRequest "
    "fulfillRequest",
    # Find in page highlights and scrolls to what it finds.
    "FindInPage": "findFirst findNext findPrev stop",
    "HeadlessExperimental": "beginFrame",
    # A collection can run the page's finalizers.
    "HeapProfiler": "collectGarbage startTrackingHeapObjects stopTrackingHeapObjects "
    "takeHeapSnapshot",
    "IndexedDB": "clearObjectStore deleteDatabase deleteObjectStoreEntries",
    "Input": "cancelDragging dispatchDragEvent dispatchKeyEvent dispatchMouseEvent "
    "dispatchTouchEvent emulateTouchFromMouseEvent imeSetComposition insertText "
    "setIgnoreInputEvents setInterceptDrags synthesizePinchGesture synthesizeScrollGesture "
    "synthesizeTapGesture",
    "Memory": "forciblyPurgeJavaScriptMemory getDOMCountersForLeakDetection "
    "prepareForLeakDetection setPressureNotificationsSuppressed simulatePressureNotification",
    # loadNetworkResource: a request with the page's cookies.
    "Network": "clearBrowserCache clearBrowserCookies deleteCookies deleteDeviceBoundSession "
    "disable emulateNetworkConditions emulateNetworkConditionsByRule loadNetworkResource "
    "overrideNetworkState replayXHR setBlockedURLs setBypassServiceWorker setCacheDisabled "
    "setCookie setCookieControls setCookies setExtraHTTPHeaders setUserAgentOverride",
    # Everything drawn over the page is in its frames and video.
    "Overlay": "disable hideHighlight highlightFrame highlightNode highlightQuad highlightRect "
    "highlightSourceOrder setInspectMode setPausedInDebuggerMessage setShowAdHighlights "
    "setShowContainerQueryOverlays setShowDebugBorders setShowDisplayCutout setShowFPSCounter "
    "setShowFlexOverlays setShowGridOverlays setShowHinge setShowHitTestBorders "
    "setShowInspectedElementAnchor setShowIsolatedElements setShowLayoutShiftRegions "
    "setShowPaintRects setShowScrollBottleneckRects setShowScrollSnapOverlays "
    "setShowViewportSizeOnResize setShowWebVitals setShowWindowControlsOverlay",
    "PWA": "changeAppUserSettings install launch launchFilesInApp openCurrentPageInApp uninstall",
    # Printing runs the page's beforeprint handlers; a test report reaches
    # its ReportingObserver; waitForDebugger holds it.
    "Page": "addCompilationCache addScriptToEvaluateOnLoad addScriptToEvaluateOnNewDocument "
    "bringToFront clearCompilationCache clearDeviceMetricsOverride clearDeviceOrientationOverride "
    "clearGeolocationOverride close crash deleteCookie disable generateTestReport "
    "handleJavaScriptDialog navigate navigateToHistoryEntry printToPDF produceCompilationCache "
    "reload removeScriptToEvaluateOnLoad removeScriptToEvaluateOnNewDocument "
    "resetNavigationHistory setAdBlockingEnabled setBypassCSP setDeviceMetricsOverride "
    "setDeviceOrientationOverride setDocumentContent setDownloadBehavior setFontFamilies "
    "setFontSizes setGeolocationOverride setInterceptFileChooserDialog setPrerenderingAllowed "
    "setRPHRegistrationMode setSPCTransactionMode setTouchEmulationEnabled setWebLifecycleState "
    "stopLoading waitForDebugger",
    # A binding is a function on the page's global; compileScript's source
    # is code the agent runs (runScript runs it).
    "Runtime": "addBinding callFunctionOn compileScript disable evaluate removeBinding runScript "
    "terminateExecution",
    "Security": "disable handleCertificateError setIgnoreCertificateErrors "
    "setOverrideCertificateErrors",
    "ServiceWorker": "deliverPushMessage dispatchPeriodicSyncEvent dispatchSyncEvent "
    "setForceUpdateOnPageLoad skipWaiting startWorker stopAllWorkers stopWorker unregister "
    "updateRegistration",
    "SmartCardEmulation": "disable enable reportBeginTransactionResult reportConnectResult "
    "reportDataResult reportError reportEstablishContextResult reportGetStatusChangeResult "
    "reportListReadersResult reportPlainResult reportReleaseContextResult reportStatusResult",
    "Storage": "clearCookies clearDataForOrigin clearDataForStorageKey "
    "clearPrivateVerificationTokens clearTrustTokens deletePrivateVerificationToken "
    "deleteStorageBucket overrideQuotaForOrigin runBounceTrackingMitigations setCookies",
    "Target": "activateTarget autoAttachRelated closeTarget createBrowserContext createTarget "
    "detachFromTarget disposeBrowserContext exposeDevToolsProtocol openDevTools "
    "sendMessageToTarget setAutoAttach setRemoteLocations",
    "Tethering": "bind unbind",
    # enable puts a virtual authenticator in place of the page's.
    "WebAuthn": "addCredential addVirtualAuthenticator clearCredentials disable enable "
    "removeCredential removeVirtualAuthenticator setAutomaticPresenceSimulation "
    "setCredentialProperties setResponseOverrideBits setUserVerified",
    "WebMCP": "cancelInvocation invokeTool",
}

#: Commands that only read (see :data:`_READING`).
READING_COMMANDS = frozenset(c for d, names in _READING.items() for c in _names(d, names))
#: Commands named as acting (see :data:`_ACTING`).
ACTING_COMMANDS = frozenset(c for d, names in _ACTING.items() for c in _names(d, names))

#: Reading commands that act with a parameter set: a screenshot beyond the
#: viewport resizes the page for it (its resize handlers run).
ACTING_WITH: dict[str, str] = {"Page.captureScreenshot": "captureBeyondViewport"}


def acts(method: str, params: Mapping[str, Any] | None) -> Acts:
    """Whether this command, with these params, acts (:data:`ACTING_WITH`)."""
    mark = classify(method).acts
    if mark == READING and params and method in ACTING_WITH and params.get(ACTING_WITH[method]):
        return ACTING
    return mark


_UNCLASSIFIED = Command(
    REFUSED,
    f"not in the protocol of the Chromium this computer ships ({CHROMIUM}), so not "
    "classified; see docs/security.md",
    "unclassified",
)


def _entry(method: str) -> Command:
    found = EXCEPTIONS.get(method) or DOMAINS.get(method.partition(".")[0]) or _UNCLASSIFIED
    mark = READING if method in READING_COMMANDS else ACTING
    return replace(found, acts=mark, params=PARAMS.get(method))


#: Each command of the pinned protocol, whole: its standing, mark and params.
_TABLE: dict[str, Command] = {method: _entry(method) for method in COMMANDS}


def classify(method: str) -> Command:
    """What the relay does with ``method``, by the table: its standing,
    whether it acts, and the parameters it takes. One not in the pinned
    protocol is refused as ``unclassified`` (and would act)."""
    return _TABLE.get(method, _UNCLASSIFIED)
