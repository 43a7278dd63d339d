<?php

/**
 * The CMS REST route /wp-json/service/v1/*: what the service can only learn from the shop server.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * Routes:
 * - GET  statement?url=  a fresh product statement for a product page (never cached);
 * - POST pageview        a logged-in visitor's pageview, wpUserId added here (nonce required);
 * - POST leads           a form lead, with the live cart, WooCommerce session id and user id;
 * - POST surveys         survey answers, same-origin for a strict Content-Security-Policy.
 *
 * Each validates its input against the schema below (WordPress answers 400 rest_invalid_param
 * and nothing is forwarded). The user id only ever comes from WordPress's own authentication
 * (the logged-in cookie plus the REST nonce); a body cannot name a user. Sec-GPC: 1 answers 204
 * and nothing is forwarded; on a site that requires consent, nothing is forwarded without it.
 */
final class Rest
{
    public const NAMESPACE = 'service/v1';

    public static function hooks(): void
    {
        add_action('rest_api_init', [self::class, 'register']);
        add_filter('rest_post_dispatch', [Limits::class, 'retryAfter']);
    }

    /** @return array<string, array<string, mixed>> */
    private static function contextArgs(): array
    {
        $id = ['type' => 'string', 'pattern' => '^[A-Za-z0-9_-]{1,64}$'];
        return [
            'visitorId' => $id,
            'sessionId' => $id,
            'url' => ['type' => 'string', 'minLength' => 1, 'maxLength' => 4096],
            'language' => ['type' => 'string', 'maxLength' => 35],
            'screen' => ['type' => 'string', 'pattern' => '^[0-9]{1,5}x[0-9]{1,5}$'],
            'timeZone' => ['type' => 'string', 'maxLength' => 64],
            'consent' => ['type' => 'string', 'enum' => ['granted', 'denied', 'unknown']],
        ];
    }

    public static function register(): void
    {
        $context = self::contextArgs();
        register_rest_route(self::NAMESPACE, '/statement', [
            'methods' => 'GET',
            'callback' => [self::class, 'statement'],
            'permission_callback' => static fn () => Limits::allow('statement'),
            'args' => ['url' => ['type' => 'string', 'required' => true, 'minLength' => 1, 'maxLength' => 4096]],
        ]);
        register_rest_route(self::NAMESPACE, '/pageview', [
            'methods' => 'POST',
            'callback' => [self::class, 'pageview'],
            // Only a logged-in visitor (cookie + nonce); anonymous pageviews go to /sdk/v1.
            'permission_callback' => 'is_user_logged_in',
            'args' => [
                'visitorId' => $context['visitorId'] + ['required' => true],
                'url' => $context['url'] + ['required' => true],
                'pageviewId' => $context['visitorId'],
                'title' => ['type' => 'string', 'maxLength' => 1000],
                'referrer' => ['type' => 'string', 'maxLength' => 4096],
            ] + $context,
        ]);
        register_rest_route(self::NAMESPACE, '/leads', [
            'methods' => 'POST',
            'callback' => [self::class, 'lead'],
            'permission_callback' => static fn () => Limits::allow('leads'),
            'args' => [
                'visitorId' => $context['visitorId'] + ['required' => true],
                'email' => ['type' => 'string', 'required' => true, 'format' => 'email', 'maxLength' => 254],
                'name' => ['type' => 'string', 'maxLength' => 200],
                'phone' => ['type' => 'string', 'maxLength' => 50],
                'formId' => ['type' => 'string', 'maxLength' => 128],
                'fields' => [
                    'type' => 'object',
                    'maxProperties' => 50,
                    'additionalProperties' => ['type' => ['string', 'number', 'boolean', 'null'], 'maxLength' => 2000],
                ],
            ] + $context,
        ]);
        // The shop's own loopback request that delivers the outbox (Outbox::sendPending): signed
        // with WordPress's secret salt, so nobody else can make the site call the service.
        register_rest_route(self::NAMESPACE, '/deliver', [
            'methods' => 'POST',
            'callback' => [self::class, 'deliver'],
            'permission_callback' => [self::class, 'deliverAllowed'],
            'args' => [
                'at' => ['type' => 'integer', 'required' => true],
                'signature' => ['type' => 'string', 'required' => true, 'pattern' => '^[0-9a-f]{64}$'],
            ],
        ]);
        register_rest_route(self::NAMESPACE, '/surveys', [
            'methods' => 'POST',
            'callback' => [self::class, 'survey'],
            'permission_callback' => static fn () => Limits::allow('surveys'),
            'args' => [
                'surveyId' => ['type' => 'string', 'required' => true, 'minLength' => 1, 'maxLength' => 128],
                'responseId' => $context['visitorId'],
                'answers' => [
                    'type' => 'array',
                    'required' => true,
                    'minItems' => 1,
                    'maxItems' => 100,
                    'items' => [
                        'type' => 'object',
                        'additionalProperties' => false,
                        'required' => ['question'],
                        'properties' => [
                            'question' => ['type' => 'string', 'minLength' => 1, 'maxLength' => 1000],
                            'score' => ['type' => 'number'],
                            'text' => ['type' => 'string', 'maxLength' => 5000],
                        ],
                    ],
                ],
            ] + $context,
        ]);
    }

    public static function deliverAllowed(\WP_REST_Request $request): bool
    {
        return Outbox::validSignature((int) $request['at'], (string) $request['signature']);
    }

    /** POST deliver: the loopback request sends the outbox; nobody waits for its answer. */
    public static function deliver(): \WP_REST_Response
    {
        ignore_user_abort(true);
        if (Options::configured()) {
            Outbox::deliver();
        }
        return new \WP_REST_Response(null, 204);
    }

    /** GET statement: signed now, for this page view only; never cached by anyone. */
    public static function statement(\WP_REST_Request $request): \WP_REST_Response
    {
        $url = explode('#', (string) $request['url'], 2)[0];
        $answer = ['statement' => null];
        if (Options::configured() && !Request::gpc() && self::isOwnUrl($url)) {
            $product = WooCommerce::productForUrl($url);
            if ($product !== null) {
                $answer['statement'] = Statements::sign(Options::apiKey(), $product, $url, time());
            }
        }
        $response = new \WP_REST_Response($answer, 200);
        $response->header('Cache-Control', 'no-store, private, max-age=0');
        return $response;
    }

    /** Only this shop's own pages get statements: scheme, host and port of the home URL. */
    private static function isOwnUrl(string $url): bool
    {
        $home = wp_parse_url(home_url('/'));
        $page = wp_parse_url($url);
        if (!is_array($home) || !is_array($page)) {
            return false;
        }
        foreach (['scheme', 'host', 'port'] as $part) {
            if (($home[$part] ?? null) !== ($page[$part] ?? null)) {
                return false;
            }
        }
        return true;
    }

    /**
     * @param list<string> $names
     * @return array<string, mixed> the named, validated fields that were sent
     */
    private static function pick(\WP_REST_Request $request, array $names): array
    {
        $body = [];
        $params = $request->get_json_params();
        $params = is_array($params) ? $params : $request->get_body_params();
        foreach ($names as $name) {
            if (array_key_exists($name, $params) && $params[$name] !== null) {
                $body[$name] = $request[$name];
            }
        }
        return $body;
    }

    /** null when the item may be forwarded, otherwise the answer that drops it. */
    private static function refusal(\WP_REST_Request $request): ?\WP_REST_Response
    {
        if (Request::gpc()) {
            return new \WP_REST_Response(null, 204);
        }
        if (!Options::configured()) {
            $message = __('The Visitor Service is not configured.', 'visitor-service');
            return new \WP_REST_Response(['code' => 'not_configured', 'message' => $message], 503);
        }
        if (!Request::mayCollect(self::claimedConsent($request))) {
            return new \WP_REST_Response(['ok' => true, 'dropped' => 'consent_missing'], 200);
        }
        return null;
    }

    private static function claimedConsent(\WP_REST_Request $request): string
    {
        return $request['consent'] !== null ? (string) $request['consent'] : 'unknown';
    }

    /** POST pageview: a logged-in visitor's pageview, forwarded after the response. */
    public static function pageview(\WP_REST_Request $request): \WP_REST_Response
    {
        $refused = self::refusal($request);
        if ($refused !== null) {
            return $refused;
        }
        $body = self::pick($request, ['visitorId', 'sessionId', 'url', 'pageviewId', 'title', 'referrer',
            'language', 'screen', 'timeZone']);
        $body += Request::serverContext(self::claimedConsent($request));
        $body['pageviewId'] = $body['pageviewId'] ?? Request::newId();
        $product = WooCommerce::productForUrl(explode('#', (string) $body['url'], 2)[0]);
        if ($product !== null && self::isOwnUrl((string) $body['url'])) {
            // The server itself vouches for the product: no statement needed on this path.
            $body['productId'] = $product;
        }
        add_action('shutdown', static function () use ($body): void {
            // Without FPM or LiteSpeed the visitor waits for this script: write, do not wait.
            $sent = Client::finishResponse() ? Client::post('/ingest/pageviews', $body, 3.0)['status'] !== 0
                : Client::fireAndForget('/ingest/pageviews', $body);
            if (!$sent) {
                Options::countDropped('pageviews');
            }
        }, 1);
        return new \WP_REST_Response(['ok' => true, 'id' => $body['pageviewId']], 202);
    }

    /** POST leads: kept in the outbox before answering, so an accepted lead is never lost. */
    public static function lead(\WP_REST_Request $request): \WP_REST_Response
    {
        $refused = self::refusal($request);
        if ($refused !== null) {
            return $refused;
        }
        $body = self::pick($request, ['visitorId', 'sessionId', 'url', 'email', 'name', 'phone', 'formId',
            'fields', 'language', 'screen', 'timeZone']);
        $body += Request::serverContext(self::claimedConsent($request));
        $body['leadId'] = Request::newId();
        $body['kind'] = 'form';
        $cart = WooCommerce::cart();
        if ($cart !== null) {
            $body['cart'] = $cart;
        }
        $session = WooCommerce::sessionId();
        if ($session !== null) {
            $body['ecommerceSessionId'] = $session;
        }
        return self::keep('/ingest/leads', $body, $body['leadId']);
    }

    /** POST surveys: answers forwarded same-origin, kept in the outbox like leads. */
    public static function survey(\WP_REST_Request $request): \WP_REST_Response
    {
        $refused = self::refusal($request);
        if ($refused !== null) {
            return $refused;
        }
        $body = self::pick($request, ['visitorId', 'sessionId', 'url', 'surveyId', 'responseId', 'answers',
            'language', 'screen', 'timeZone']);
        if (!isset($body['visitorId']) && !isset($body['sessionId'])) {
            return new \WP_REST_Response([
                'code' => 'rest_missing_callback_param',
                /* translators: visitorId and sessionId are field names: not to be translated */
                'message' => __('visitorId or sessionId is required.', 'visitor-service'),
                'data' => ['status' => 400, 'params' => ['visitorId']],
            ], 400);
        }
        $body += Request::serverContext(self::claimedConsent($request));
        $body['responseId'] = $body['responseId'] ?? Request::newId();
        return self::keep('/ingest/surveys', $body, $body['responseId']);
    }

    /** @param array<string, mixed> $body */
    private static function keep(string $path, array $body, string $id): \WP_REST_Response
    {
        if (!Outbox::accept($path, $body)) {
            $message = __('Could not keep the item; please try again later.', 'visitor-service');
            return new \WP_REST_Response(['code' => 'not_kept', 'message' => $message], 503);
        }
        return new \WP_REST_Response(['ok' => true, 'id' => $id], 202);
    }
}
