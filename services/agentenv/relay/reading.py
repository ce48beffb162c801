"""What each CDP command does to the record: it reads, or it acts
(docs/spec.md section 1, "Acting or reading"). No I/O.

:data:`READING_COMMANDS` names, domain by domain, the commands that cannot
change any page, its pixels, its network or its storage; :data:`ACTING_COMMANDS`
names every other one of the pinned list (:data:`agentenv.relay.pinned.COMMANDS`).
Every command is named in one of the two (a test fails on one named in
neither), and a command named in neither acts: its line keeps its params
(redacted), it is the latest act of its tab, and a recording frames after
it. Code an agent runs is acting, wherever it runs (``Runtime.compileScript``,
a breakpoint's condition, ``Debugger.evaluateOnCallFrame``, scripts added on
load); so is whatever draws over the page (``Overlay.*`` highlights, find
in page) or moves it (``DOM.scrollIntoViewIfNeeded``).
:func:`agentenv.relay.commands.acts` reads them with the command's params.
"""

from __future__ import annotations

__all__ = ["ACTING_COMMANDS", "ACTING_WITH", "READING_COMMANDS"]


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
