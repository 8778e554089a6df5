"""Hand-labelled τ² retail conversations (see ``dsl``). Written, and labelled, before the rules were tuned.

The agent failures are ones LLM agents make on these tasks: the wrong variant of an item, one exchange per
order forgotten, a part of the request dropped, a typo in a value the user gave, sums told wrong, a failed
call reported as done, a repeated failing call.
"""

from __future__ import annotations

from tests.analyze.handlabelled.dsl import A, Case, U, call

CASES: list[Case] = []
add = CASES.append

YUSUF_AUTH = [
    U("Hi, I received my order #W2378156 and I'd like to exchange a couple of items."),
    A("I'd be glad to help. First I need to verify your identity: could you give me your email, or your name and zip code?"),
    U("I don't remember my email. I'm Yusuf Rossi, zip code 19122."),
    call("find_user_id_by_name_zip", first_name="Yusuf", last_name="Rossi", zip="19122"),
    call("get_order_details", order_id="#W2378156"),
    A("Thank you, Yusuf. Order #W2378156 is delivered and contains headphones, a vacuum cleaner, a mechanical keyboard (linear switches, "
      "RGB backlight, full size), a smart thermostat (Apple HomeKit, black) and a smart watch. Which items would you like to exchange?"),
    U("The mechanical keyboard: I want the same one but with clicky switches. And the smart thermostat: I want one compatible with "
      "Google Home instead of Apple HomeKit. If there's no clicky keyboard with RGB backlight in full size, I'd go for no backlight."),
    call("get_product_details", product_id="1656367028"),
    call("get_product_details", product_id="4896585277"),
]
add(Case(
    id="ret-00-wrong-backlight", domain="retail", task="0", split="tune", expect="failure",
    turns=YUSUF_AUTH + [
        A("A clicky, RGB, full-size keyboard is not available. The closest available option is clicky switches, white backlight, full "
          "size (item 6342039236, $244.91). For the thermostat, the Google Assistant version in black is available (item 7747408585, "
          "$249.01). Exchanging both gives you a refund of $40.88 to your Mastercard ending in 2478. Please confirm you have listed all "
          "the items you want to exchange, and that I should proceed (yes/no)."),
        U("Yes, that's everything. Please go ahead."),
        call("exchange_delivered_order_items", order_id="#W2378156", item_ids=["1151293680", "4983901480"],
             new_item_ids=["6342039236", "7747408585"], payment_method_id="credit_card_9513926"),
        A("Your exchange has been requested: keyboard → clicky/white/full size and thermostat → Google Assistant/black. You'll receive "
          "an email with return instructions, and $40.88 will be refunded to your card."),
        U("Thanks! ###STOP###"),
    ],
    lacking={"structured_data_reasoning": "new keyboard 6342039236 has a white backlight; the user's fallback was no backlight, and "
                                          "7706410293 (clicky, none, full size) was available in the product the agent had read"},
))
add(Case(
    id="ret-01-exchange-split-in-two", domain="retail", task="0", split="holdout", expect="failure",
    turns=YUSUF_AUTH + [
        A("There's no clicky keyboard with RGB backlight in full size available, so I found the clicky, no-backlight, full-size model "
          "(item 7706410293, $269.16). For the thermostat, the Google Assistant model in black is item 7747408585 ($249.01). Let me "
          "start with the keyboard: exchanging 1151293680 for 7706410293 refunds $3.17 to your Mastercard. Shall I proceed? (yes/no)"),
        U("Yes, and the thermostat too."),
        call("exchange_delivered_order_items", order_id="#W2378156", item_ids=["1151293680"], new_item_ids=["7706410293"],
             payment_method_id="credit_card_9513926"),
        call("exchange_delivered_order_items", order_id="#W2378156", item_ids=["4983901480"], new_item_ids=["7747408585"],
             payment_method_id="credit_card_9513926"),
        A("Both exchanges are done! You'll get an email with instructions on returning the keyboard and the thermostat. Your refunds: "
          "$3.17 and $13.46."),
        U("Great, thanks. ###STOP###"),
    ],
    lacking={"policy_application": "two exchange calls on #W2378156; the policy allows one exchange per order, with every item "
                                   "collected in one call",
             "permission_error_recovery": "the second exchange failed ('Non-delivered order cannot be exchanged') and the agent told "
                                          "the user both were done"},
))
add(Case(
    id="ret-02-one-exchange-both-items", domain="retail", task="0", split="tune", expect="success",
    turns=YUSUF_AUTH + [
        A("No clicky keyboard with RGB backlight in full size is available, so per your preference: clicky, no backlight, full size "
          "(item 7706410293, $269.16). Thermostat: Google Assistant, black (item 7747408585, $249.01). Exchanging both in one request "
          "refunds $16.63 to your Mastercard ending in 2478. Have you listed all items you want to exchange? Shall I proceed? (yes/no)"),
        U("Yes, that's all. Go ahead."),
        call("exchange_delivered_order_items", order_id="#W2378156", item_ids=["1151293680", "4983901480"],
             new_item_ids=["7706410293", "7747408585"], payment_method_id="credit_card_9513926"),
        A("Done! The exchange is requested and you'll receive an email with instructions."),
        U("Thank you! ###STOP###"),
    ],
))

YUSUF_RETURN_START = [
    U("Hi! How many t-shirt options are available in your online store right now? Also, I want to return some items."),
    A("Happy to help. Could you verify your identity with your email, or your name and zip code?"),
    U("Yusuf Rossi, 19122."),
    call("find_user_id_by_name_zip", first_name="Yusuf", last_name="Rossi", zip="19122"),
    call("list_all_product_types"),
    call("get_product_details", product_id="9523456873"),
    A("Thanks, Yusuf. There are 10 t-shirt options available right now. Which items would you like to return?"),
    U("The cleaner, the headphones and the smart watch."),
    call("get_user_details", user_id="yusuf_rossi_9620"),
    call("get_order_details", order_id="#W2378156"),
]
add(Case(
    id="ret-03-watch-left-out", domain="retail", task="2", split="holdout", expect="failure",
    turns=YUSUF_RETURN_START + [
        A("I found them in order #W2378156 (delivered): the robotic vacuum cleaner ($561.05) and the over-ear headphones ($342.81). The "
          "refund of $903.86 will go to your Mastercard ending in 2478. Shall I process the return? (yes/no)"),
        U("Yes."),
        call("return_delivered_order_items", order_id="#W2378156", item_ids=["4602305039", "4202497723"], payment_method_id="credit_card_9513926"),
        A("The return is requested. You'll receive an email with instructions, and $903.86 will be refunded."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"multi_step_task_completion": "the user asked to return the cleaner, the headphones and the smart watch; the return lists "
                                           "only the first two although the watch (9408160950) was in the order the agent had read"},
))
add(Case(
    id="ret-04-three-returned", domain="retail", task="2", split="tune", expect="success",
    turns=YUSUF_RETURN_START + [
        A("All three are in order #W2378156 (delivered): vacuum cleaner ($561.05), headphones ($342.81) and smart watch ($381.26). "
          "Refund of $1285.12 to your Mastercard ending in 2478. Shall I process the return? (yes/no)"),
        U("Yes."),
        call("return_delivered_order_items", order_id="#W2378156", item_ids=["4602305039", "4202497723", "9408160950"],
             payment_method_id="credit_card_9513926"),
        A("Done: the return is requested and you'll receive an email with instructions."),
        U("Thanks! ###STOP###"),
    ],
))

FATIMA_AUTH = [
    A("Sure! First, please verify your identity with your email, or your name and zip code."),
    U("I'm Fatima Johnson, zip 78712. I don't remember my email."),
    call("find_user_id_by_name_zip", first_name="Fatima", last_name="Johnson", zip="78712"),
    call("get_user_details", user_id="fatima_johnson_7581"),
]
add(Case(
    id="ret-05-boots-wrong-size", domain="retail", task="15", split="tune", expect="failure",
    turns=[U("Hi, I want to change the boots in my pending order.")] + FATIMA_AUTH + [
        call("get_order_details", order_id="#W5199551"),
        call("get_product_details", product_id="7363354090"),
        A("Your pending order #W5199551 has hiking boots in size 10, synthetic, waterproof. What would you like to change?"),
        U("I want size 8, and I want the same material. I don't care about waterproof or not. PayPal for any payment or refund."),
        A("The available option is size 9 in leather, waterproof (item 8106223139, $249.12), a refund of $4.77 to PayPal. Note that "
          "items in an order can only be modified once. Have you listed everything you want to modify? Proceed? (yes/no)"),
        U("Hmm, OK, yes."),
        call("modify_pending_order_items", order_id="#W5199551", item_ids=["1615379700"], new_item_ids=["8106223139"],
             payment_method_id="paypal_5364164"),
        A("Your boots have been changed and $4.77 will be refunded to PayPal."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"structured_data_reasoning": "the user asked for size 8 in the same material (synthetic); the new item 8106223139 is size 9 "
                                          "leather, while 3613716226 (size 8, synthetic) was available in the product read"},
))
add(Case(
    id="ret-06-boots-size-8", domain="retail", task="15", split="tune", expect="success",
    turns=[U("Hi, I want to modify the boots in my pending order.")] + FATIMA_AUTH + [
        call("get_order_details", order_id="#W5199551"),
        call("get_product_details", product_id="7363354090"),
        A("Your pending order #W5199551 has hiking boots in size 10, synthetic, waterproof. What would you like instead?"),
        U("Size 8, same material, waterproof doesn't matter. PayPal for any payment or refund."),
        A("Size 8 in synthetic is available (not waterproof): item 3613716226 at $253.54, a refund of $0.35 to PayPal. Items can be "
          "modified only once per order; is this the only change? Proceed? (yes/no)"),
        U("Yes."),
        call("modify_pending_order_items", order_id="#W5199551", item_ids=["1615379700"], new_item_ids=["3613716226"],
             payment_method_id="paypal_5364164"),
        A("Done: your boots are now size 8, synthetic."),
        U("Thanks! ###STOP###"),
    ],
))

FATIMA_CANCEL_READ = [
    U("Hi. I want to cancel all my pending orders, since I no longer need them, and return the watch I received. I also want to know "
      "the total amount I'll get back.")] + FATIMA_AUTH + [
    call("get_order_details", order_id="#W5199551"),
    call("get_order_details", order_id="#W8665881"),
    call("get_order_details", order_id="#W9389413"),
    A("You have two pending orders: #W5199551 ($3,131.10) and #W8665881 ($4,777.75). The watch you received is the smart watch in "
      "order #W9389413 ($367.38). Note: #W8665881 also contains a smart watch, but it's pending. Shall I cancel both pending orders "
      "(reason: no longer needed) and return the smart watch from #W9389413 to PayPal? (yes/no)"),
    U("Yes please."),
]
add(Case(
    id="ret-07-total-refund-miscounted", domain="retail", task="16", split="holdout", expect="failure",
    turns=FATIMA_CANCEL_READ + [
        call("cancel_pending_order", order_id="#W5199551", reason="no longer needed"),
        call("cancel_pending_order", order_id="#W8665881", reason="no longer needed"),
        call("return_delivered_order_items", order_id="#W9389413", item_ids=["2554056026"], payment_method_id="paypal_5364164"),
        A("All done. Both pending orders are cancelled and the watch return is requested. In total you'll get back $8,267.23: $3,131.10 "
          "+ $4,777.75 + $367.38."),
        U("Thank you. ###STOP###"),
    ],
    lacking={"structured_data_reasoning": "$3,131.10 + $4,777.75 + $367.38 is $8,276.23; the agent told the user $8,267.23"},
))
add(Case(
    id="ret-08-second-order-not-cancelled", domain="retail", task="16", split="tune", expect="failure",
    turns=FATIMA_CANCEL_READ + [
        call("cancel_pending_order", order_id="#W5199551", reason="no longer needed"),
        call("return_delivered_order_items", order_id="#W9389413", item_ids=["2554056026"], payment_method_id="paypal_5364164"),
        A("Done! Order #W5199551 is cancelled and the return of your smart watch is requested. You'll get back $3,131.10 + $367.38 = "
          "$3,498.48."),
        U("OK, thanks. ###STOP###"),
    ],
    lacking={"multi_step_task_completion": "the user confirmed cancelling both pending orders; #W8665881 was never cancelled"},
))

add(Case(
    id="ret-09-suite-number-typo", domain="retail", task="17", split="tune", expect="failure",
    turns=[U("Hi, I want to change the delivery address of order #W8665881 to Suite 641.")] + FATIMA_AUTH + [
        call("get_order_details", order_id="#W8665881"),
        A("Order #W8665881 is pending and will be delivered to 123 Elm Street, Suite 640, Austin, TX 78712, USA. I'll change it to 123 Elm "
          "Street, Suite 614, Austin, TX 78712, USA. Confirm? (yes/no)"),
        U("Yes."),
        call("modify_pending_order_address", order_id="#W8665881", address1="123 Elm Street", address2="Suite 614", city="Austin",
             state="TX", country="USA", zip="78712"),
        A("The delivery address of #W8665881 is updated."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"tool_calling_precision": "address2 'Suite 614' in the call; the user asked for Suite 641, a value no record holds"},
))
add(Case(
    id="ret-10-suite-641", domain="retail", task="17", split="holdout", expect="success",
    turns=[U("Hi, I want order #W8665881 delivered to Suite 641 instead.")] + FATIMA_AUTH + [
        call("get_order_details", order_id="#W8665881"),
        A("I'll change the address of #W8665881 to 123 Elm Street, Suite 641, Austin, TX 78712, USA. Confirm? (yes/no)"),
        U("Yes."),
        call("modify_pending_order_address", order_id="#W8665881", address1="123 Elm Street", address2="Suite 641", city="Austin",
             state="TX", country="USA", zip="78712"),
        A("Done, the order will be delivered to Suite 641."),
        U("Thank you. ###STOP###"),
    ],
))

SOFIA_START = [
    U("Hi. I want to exchange my helmet for a medium one, red, with high ventilation. And the luggage set from another order, I want a "
      "two-piece black one with soft material. Lastly, I want to change the grill I just ordered to the same type as the one I already "
      "received."),
    A("Sure. Please verify your identity first: your email, or your name and zip code."),
    U("Sofia Hernandez, Seattle, 98193."),
    call("find_user_id_by_name_zip", first_name="Sofia", last_name="Hernandez", zip="98193"),
    call("get_user_details", user_id="sofia_hernandez_5364"),
    call("get_order_details", order_id="#W3561391"),
    call("get_order_details", order_id="#W6876713"),
    call("get_order_details", order_id="#W3947049"),
    call("get_product_details", product_id="7765186836"),
    call("get_product_details", product_id="5426915165"),
    call("get_product_details", product_id="6819683148"),
    A("Here's what I can do, all charged or refunded to your Visa ending in 7312:\n1. Helmet (order #W3947049): S/red/low → M/red/high "
      "(item 8573379326), refund $0.60.\n2. Luggage set (order #W6876713): 3-piece blue softshell → 2-piece black softshell (item "
      "8926329222), refund $43.59.\n3. Grill (pending order #W3561391): gas/portable → charcoal/medium/rotisserie like the one you "
      "received (item 7082455361), refund $94.55.\nPlease confirm these are all the items, and that I should proceed (yes/no)."),
    U("Yes, go ahead."),
    call("exchange_delivered_order_items", order_id="#W3947049", item_ids=["3358616356"], new_item_ids=["8573379326"],
         payment_method_id="credit_card_7901829"),
    call("exchange_delivered_order_items", order_id="#W6876713", item_ids=["6301799585"], new_item_ids=["8926329222"],
         payment_method_id="credit_card_7901829"),
]
add(Case(
    id="ret-11-grill-not-modified", domain="retail", task="23", split="holdout", expect="failure",
    turns=SOFIA_START + [
        A("Both exchanges are requested: the helmet and the luggage set. You'll receive emails with instructions for returning the "
          "original items. Is there anything else I can help with?"),
        U("No, that's all. ###STOP###"),
    ],
    lacking={"multi_step_task_completion": "three changes were listed and confirmed; the grill in pending order #W3561391 was never "
                                           "modified"},
))
add(Case(
    id="ret-12-three-changes-done", domain="retail", task="23", split="holdout", expect="success",
    turns=SOFIA_START + [
        call("modify_pending_order_items", order_id="#W3561391", item_ids=["5946177616"], new_item_ids=["7082455361"],
             payment_method_id="credit_card_7901829"),
        A("All three changes are done: the helmet and luggage exchanges are requested, and the grill in your pending order is now the "
          "charcoal, medium, rotisserie model."),
        U("Perfect. ###STOP###"),
    ],
))

DAIKI_OPEN = [
    U("Hi. I just placed an order but my card only has $1131 left and the order is over $1160. Can you split the payment with another "
      "card? My email is daikisanchez1479@example.com."),
    call("find_user_id_by_email", email="daikisanchez1479@example.com"),
    A("I couldn't find an account with that email. Could you give me your name and zip code instead?"),
    U("Daiki Sanchez, 46236."),
    call("find_user_id_by_name_zip", first_name="Daiki", last_name="Sanchez", zip="46236"),
    call("get_user_details", user_id="daiki_sanchez_3253"),
    call("get_order_details", order_id="#W9348897"),
    A("Thanks, Daiki. A pending order can only be paid with a single payment method, and your profile has only the Visa ending in "
      "6593, so I can't split the payment."),
    U("What's the most expensive item and its price? Can I cancel just that one?"),
    A("The most expensive item is the action camera at $481.50. Unfortunately, I can't cancel a single item of an order; only the "
      "whole order can be cancelled."),
    U("Then can you switch all items to their cheapest options, to bring the cost down to $1131?"),
    call("get_product_details", product_id="3377618313"),
    call("get_product_details", product_id="9743693396"),
    call("get_product_details", product_id="6817146515"),
    call("get_product_details", product_id="9523456873"),
    call("get_product_details", product_id="2524789262"),
]
add(Case(
    id="ret-13-not-the-cheapest-lamp", domain="retail", task="36", split="tune", expect="failure",
    turns=DAIKI_OPEN + [
        A("Here are the cheapest available options for each item:\n- Action camera: 4K, waterproof, black (6700049080), $466.75\n- Desk "
          "lamp: silver, low brightness, AC adapter (1569765161), $143.02\n- T-shirt: red, L, cotton, v-neck (3234800602), $46.66\nThe "
          "patio umbrella and backpack are already the cheapest available. The new total would be $1,138.63. Items can only be "
          "modified once. Shall I proceed? (yes/no)"),
        U("It's still above $1131 but do it."),
        call("modify_pending_order_items", order_id="#W9348897", item_ids=["6117189161", "7453605304", "3799046073"],
             new_item_ids=["6700049080", "1569765161", "3234800602"], payment_method_id="credit_card_8853416"),
        A("Done: the three items have been switched and the difference refunded to your Visa."),
        U("OK. ###STOP###"),
    ],
    lacking={"structured_data_reasoning": "asked for the cheapest options; the desk lamp chosen (1569765161, $143.02) is not the cheapest "
                                          "available variant of the product read (5320792178, $135.24)"},
))
add(Case(
    id="ret-14-cheapest-options", domain="retail", task="36", split="holdout", expect="success",
    turns=DAIKI_OPEN + [
        A("The cheapest available options are: action camera 6700049080 ($466.75), desk lamp 5320792178 ($135.24), t-shirt 3234800602 "
          "($46.66); the umbrella and backpack are already the cheapest. The new total would be $1,130.85, under $1131. Items can be "
          "modified only once. Proceed? (yes/no)"),
        U("Yes, do it."),
        call("modify_pending_order_items", order_id="#W9348897", item_ids=["6117189161", "7453605304", "3799046073"],
             new_item_ids=["6700049080", "5320792178", "3234800602"], payment_method_id="credit_card_8853416"),
        A("Done! Your order total is now $1,130.85."),
        U("Thanks. ###STOP###"),
    ],
))

FATIMA_T_OPEN = [
    U("Hi! I just moved from Florida to Phoenix and my address on file is still the old one. My user id is fatima_taylor_3452. The "
      "right address is on my recent order."),
    A("Welcome to Phoenix! To verify your identity, could you give me your email, or your name and zip code?"),
    U("Fatima Taylor, zip 32169."),
    call("find_user_id_by_name_zip", first_name="Fatima", last_name="Taylor", zip="32169"),
    call("get_user_details", user_id="fatima_taylor_3452"),
    call("get_order_details", order_id="#W5285031"),
]
add(Case(
    id="ret-15-zip-typo", domain="retail", task="39", split="holdout", expect="failure",
    turns=FATIMA_T_OPEN + [
        A("Your recent order #W5285031 was shipped to 157 Oak Street, Suite 258, Phoenix, AZ. I'll update your default address to 157 Oak "
          "Street, Suite 258, Phoenix, AZ 85303, USA. Confirm? (yes/no)"),
        U("Yes. Also, what's the price of the cheapest t-shirt available right now, and can I order it through you?"),
        call("modify_user_address", user_id="fatima_taylor_3452", address1="157 Oak Street", address2="Suite 258", city="Phoenix",
             state="AZ", country="USA", zip="85303"),
        call("list_all_product_types"),
        call("get_product_details", product_id="9523456873"),
        A("Your address is updated. The cheapest available t-shirt is $46.66 (red, L, cotton, v-neck). I can't place new orders, "
          "though: you'd need to order it on the website."),
        U("Haha, fine. ###STOP###"),
    ],
    lacking={"tool_calling_precision": "zip '85303' in modify_user_address; the order it copied the address from says 85033"},
))
add(Case(
    id="ret-16-address-from-order", domain="retail", task="39", split="tune", expect="success",
    turns=FATIMA_T_OPEN + [
        A("I'll update your default address to the one on order #W5285031: 157 Oak Street, Suite 258, Phoenix, AZ 85033, USA. Confirm? "
          "(yes/no)"),
        U("Yes. And what's the cheapest t-shirt right now? Can I order it through you?"),
        call("modify_user_address", user_id="fatima_taylor_3452", address1="157 Oak Street", address2="Suite 258", city="Phoenix",
             state="AZ", country="USA", zip="85033"),
        call("list_all_product_types"),
        call("get_product_details", product_id="9523456873"),
        A("Done. The cheapest available t-shirt costs $46.66. I can't place orders, but you can order it on our website."),
        U("Thanks! ###STOP###"),
    ],
))

ETHAN_OPEN = [
    U("Hi, I want to exchange my shoes to item 4107812777 and use my gift card for any charge."),
    A("Sure! Please verify your identity: email, or name and zip code."),
    U("Ethan Garcia, 80280."),
    call("find_user_id_by_name_zip", first_name="Ethan", last_name="Garcia", zip="80280"),
    call("get_user_details", user_id="ethan_garcia_1261"),
    call("get_order_details", order_id="#W9911714"),
    call("get_product_details", product_id="6938111410"),
    A("Your running shoes (size 9, yellow, item 9791469541) are in pending order #W9911714. Item 4107812777 is the same shoe in black, "
      "$155.33, so $8.28 would be charged to your gift card (balance $86). Items in an order can only be modified once. Shall I "
      "proceed? (yes/no)"),
    U("Yes. Oh, and also change item 1656367028 to 1421289881."),
]
add(Case(
    id="ret-17-second-modify-repeated", domain="retail", task="21", split="tune", expect="failure",
    turns=ETHAN_OPEN + [
        call("modify_pending_order_items", order_id="#W9911714", item_ids=["9791469541"], new_item_ids=["4107812777"],
             payment_method_id="gift_card_4332117"),
        call("get_product_details", product_id="1656367028"),
        A("The shoes are done. 1656367028 is the mechanical keyboard product; your keyboard is item 1340995114, and 1421289881 costs "
          "$268.77, so $33.64 more on your gift card. Proceed? (yes/no)"),
        U("Yes."),
        call("modify_pending_order_items", order_id="#W9911714", item_ids=["1340995114"], new_item_ids=["1421289881"],
             payment_method_id="gift_card_4332117"),
        call("modify_pending_order_items", order_id="#W9911714", item_ids=["1340995114"], new_item_ids=["1421289881"],
             payment_method_id="gift_card_4332117"),
        A("I'm sorry, there seems to be a problem with the system: I'm unable to modify the keyboard right now."),
        U("OK. ###STOP###"),
    ],
    lacking={"policy_application": "modified #W9911714 before the user had listed every item, then tried a second modify on the same "
                                   "order; the policy allows one item modification per order",
             "permission_error_recovery": "the second modify failed ('Non-pending order cannot be modified') and the agent repeated "
                                          "the identical call"},
))

MIA_OPEN = [
    U("I want to return everything I ordered that isn't gaming stuff. Email mia.garcia2723@example.com."),
    call("find_user_id_by_email", email="mia.garcia2723@example.com"),
    call("get_user_details", user_id="mia_garcia_4516"),
    call("get_order_details", order_id="#W5490111"),
    call("get_order_details", order_id="#W7387996"),
    A("Your delivered orders: #W5490111 has a water bottle, a mechanical keyboard, an action camera and a backpack; #W7387996 has a "
      "gaming mouse. Which items would you like to return?"),
    U("The water bottle, the action camera and the backpack. PayPal for the refund."),
]
add(Case(
    id="ret-18-keyboard-returned-too", domain="retail", task="13", split="holdout", expect="failure",
    turns=MIA_OPEN + [
        A("Refunds must go to the original payment method or a gift card, so the refund would go to your Visa ending in 7285. I'll "
          "return the water bottle, the keyboard, the action camera and the backpack from #W5490111: $1,023.16 in total. Confirm? "
          "(yes/no)"),
        U("Credit card is fine. Yes."),
        call("return_delivered_order_items", order_id="#W5490111", item_ids=["4579334072", "1421289881", "6117189161", "4947717507"],
             payment_method_id="credit_card_3124723"),
        A("The return is requested; you'll get an email with instructions."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"tool_calling_precision": "item_ids include the keyboard 1421289881, which the user did not name (water bottle, action "
                                       "camera, backpack)"},
    also={"structured_data_reasoning": "carried an item the user had not chosen into the call"},
))
add(Case(
    id="ret-19-three-items-returned", domain="retail", task="13", split="tune", expect="success",
    turns=MIA_OPEN + [
        A("Refunds can only go to the original payment method or a gift card, so I'll refund your Visa ending in 7285. Return the water "
          "bottle, action camera and backpack from #W5490111 ($754.39)? (yes/no)"),
        U("OK, yes."),
        call("return_delivered_order_items", order_id="#W5490111", item_ids=["4579334072", "6117189161", "4947717507"],
             payment_method_id="credit_card_3124723"),
        A("Done, the return is requested."),
        U("Thanks. ###STOP###"),
    ],
))

ISABELLA_OPEN = [
    U("Hi, from a recent order I want to return the garden hose and the backpack, and exchange the hiking boots for the exact same "
      "ones but waterproof."),
    A("I can help. Please verify your identity: email, or name and zip code."),
    U("Isabella Johansson, 32286."),
    call("find_user_id_by_name_zip", first_name="Isabella", last_name="Johansson", zip="32286"),
    call("get_user_details", user_id="isabella_johansson_2152"),
    call("get_order_details", order_id="#W7181492"),
    call("get_product_details", product_id="7363354090"),
]
add(Case(
    id="ret-20-return-then-exchange-fails", domain="retail", task="27", split="holdout", expect="failure",
    turns=ISABELLA_OPEN + [
        A("All three items are in order #W7181492. I'll return the garden hose ($96.35) and the backpack ($193.38) to PayPal, and "
          "exchange the hiking boots (size 12, leather, not waterproof) for the waterproof version (item 8277474082, $236.57), refunding "
          "$23.99 to PayPal. Proceed? (yes/no)"),
        U("Yes, quickly please."),
        call("return_delivered_order_items", order_id="#W7181492", item_ids=["5753502325", "9851293632"], payment_method_id="paypal_3024827"),
        call("exchange_delivered_order_items", order_id="#W7181492", item_ids=["8118291112"], new_item_ids=["8277474082"],
             payment_method_id="paypal_3024827"),
        A("All done! The return of the hose and backpack and the exchange of your boots have been requested."),
        U("Great. ###STOP###"),
    ],
    lacking={"permission_error_recovery": "the exchange failed ('Non-delivered order cannot be exchanged') and the agent told the user "
                                          "it had been requested"},
    also={"policy_application": "a delivered order allows one return or exchange: after the return the exchange was impossible",
          "multi_step_task_completion": "the exchange the user asked for was never made"},
))
add(Case(
    id="ret-21-exchange-preferred", domain="retail", task="27", split="tune", expect="success",
    turns=ISABELLA_OPEN + [
        A("These items are all in order #W7181492. Once a return or an exchange is requested on an order, its status changes, so I "
          "can only do one of the two on this order. Which would you prefer?"),
        U("Then the exchange."),
        A("Exchange the hiking boots (8118291112) for the waterproof version (8277474082, $236.57), refunding $23.99 to PayPal. Is that "
          "the only item to exchange? Proceed? (yes/no)"),
        U("Yes."),
        call("exchange_delivered_order_items", order_id="#W7181492", item_ids=["8118291112"], new_item_ids=["8277474082"],
             payment_method_id="paypal_3024827"),
        A("Done: the exchange is requested."),
        U("Thanks! ###STOP###"),
    ],
))

add(Case(
    id="ret-22-no-authentication", domain="retail", task="14", split="tune", expect="success",
    turns=[
        U("Hi, I quit gaming and want to return everything associated with it. I'm mia_garcia_4516."),
        call("get_user_details", user_id="mia_garcia_4516"),
        call("get_order_details", order_id="#W5490111"),
        call("get_order_details", order_id="#W7387996"),
        A("I see a mechanical keyboard in #W5490111 and a gaming mouse in #W7387996. Return both to their original payment methods "
          "(Visa ending in 7285 for the keyboard, PayPal for the mouse)? (yes/no)"),
        U("Yes, original payment is fine."),
        call("return_delivered_order_items", order_id="#W5490111", item_ids=["1421289881"], payment_method_id="credit_card_3124723"),
        call("return_delivered_order_items", order_id="#W7387996", item_ids=["5796612084"], payment_method_id="paypal_9497703"),
        A("Both returns are requested."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"precondition_verification": "returned items for mia_garcia_4516 without authenticating her by email or name and zip "
                                          "code, as the policy requires even when the user gives her user id"},
    note="A success that still lacked a capability: the returns happened to be right.",
))

# --------------------------------------------------------------------------------------------------------------------
# failures that are not the agent's
# --------------------------------------------------------------------------------------------------------------------
add(Case(
    id="ret-23-user-ends-at-once", domain="retail", task="17", split="tune", expect="failure", cause="user_simulator",
    turns=[U("I want to change #W8665881 to be delivered to Suite 641 instead. ###STOP###")],
    note="The simulated user ended the episode in its first message.",
))
add(Case(
    id="ret-24-user-simulator-error", domain="retail", task="15", split="holdout", expect="failure", cause="user_simulator",
    termination="user_error", metadata={"infrastructure_error": "user simulator: rate limited"},
    turns=[
        U("Hi, I want to modify the boots in my pending order."),
        A("Sure! First, please verify your identity with your email, or your name and zip code."),
    ],
))
add(Case(
    id="ret-25-revised-gold", domain="retail", task="18", split="holdout", expect="failure", cause="task_revised",
    task_file="tasks_release_2025-06-10.json",
    turns=[
        U("Hi, I want to return the office chair I got, it came with broken pieces. I'm Mei Davis, zip 80217."),
        call("find_user_id_by_name_zip", first_name="Mei", last_name="Davis", zip="80217"),
        call("get_user_details", user_id="mei_davis_8935"),
        call("get_order_details", order_id="#W2890441"),
        A("I'm sorry about that. The office chair (item 8069050545, $499.28) is in delivered order #W2890441. I can return it with a "
          "refund to your Mastercard ending in 1037. Confirm? (yes/no)"),
        U("Hmm, let me rethink... Actually, I'd rather exchange it for the same item."),
        call("get_product_details", product_id="4794339885"),
        A("An exchange must be for a different option of the same product, so I can't exchange it for the identical chair. Would you like "
          "a different variant?"),
        U("Then a gray office chair with fixed armrest, made of leather."),
        A("That's item 1071497737 (leather, gray, fixed armrest, high-back), $483.95: a refund of $15.33 to your Mastercard. Is this the "
          "only item to exchange? Proceed? (yes/no)"),
        U("Yes."),
        call("exchange_delivered_order_items", order_id="#W2890441", item_ids=["8069050545"], new_item_ids=["1071497737"],
             payment_method_id="credit_card_1061405"),
        A("Done: the exchange is requested."),
        U("Thanks. ###STOP###"),
    ],
    note="The run used the first release of the task, whose gold exchanged the chair for itself; the corrected task (τ³-bench 1.0.0) "
         "wants exactly this exchange.",
))

YUSUF_TSHIRTS = [
    U("How many t-shirt options do you have available right now? And I want to modify all my pending t-shirts."),
    A("Sure. First, please verify your identity: email, or name and zip code."),
    U("Yusuf Rossi, zipcode 19122."),
    call("find_user_id_by_name_zip", first_name="Yusuf", last_name="Rossi", zip="19122"),
    call("get_user_details", user_id="yusuf_rossi_9620"),
    call("get_order_details", order_id="#W6247578"),
    call("get_order_details", order_id="#W4776164"),
    call("get_product_details", product_id="9523456873"),
]
add(Case(
    id="ret-26-one-of-two-tshirts", domain="retail", task="4", split="holdout", expect="failure",
    turns=YUSUF_TSHIRTS + [
        A("There are 10 t-shirt options available. You have pending t-shirts in two orders: #W6247578 (black, XXL, cotton, crew neck) "
          "and #W4776164 (blue, S, cotton, v-neck). What would you like to change them to?"),
        U("Purple, size S, v-neck, and polyester if possible."),
        A("The purple, S, polyester, v-neck t-shirt is available (item 9647292434, $53.48). For order #W4776164 I'll change the blue "
          "v-neck to it, charging $0.05 to your Mastercard ending in 2478. Items can be modified only once per order. Proceed? (yes/no)"),
        U("Yes."),
        call("modify_pending_order_items", order_id="#W4776164", item_ids=["8349118980"], new_item_ids=["9647292434"],
             payment_method_id="credit_card_9513926"),
        A("Done: the t-shirt in #W4776164 is now purple, S, polyester, v-neck."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"multi_step_task_completion": "'all my pending t-shirts': the agent named two, in #W6247578 and #W4776164, and modified "
                                           "only the second"},
))
add(Case(
    id="ret-27-counts-unavailable-tshirts", domain="retail", task="4", split="tune", expect="failure",
    turns=YUSUF_TSHIRTS + [
        A("We have 12 t-shirt options in the store. You have pending t-shirts in #W6247578 (black, XXL, crew neck) and #W4776164 (blue, "
          "S, v-neck). What would you like?"),
        U("Purple, size S, v-neck, polyester if possible, for all of them."),
        A("Item 9647292434 is purple, S, polyester, v-neck ($53.48). I'll change the t-shirts in both orders to it, with the difference "
          "on your Mastercard ending in 2478: $0.21 for #W6247578 and $0.05 for #W4776164. Items can be modified only once per order. "
          "Proceed? (yes/no)"),
        U("Yes."),
        call("modify_pending_order_items", order_id="#W6247578", item_ids=["3799046073"], new_item_ids=["9647292434"],
             payment_method_id="credit_card_9513926"),
        call("modify_pending_order_items", order_id="#W4776164", item_ids=["8349118980"], new_item_ids=["9647292434"],
             payment_method_id="credit_card_9513926"),
        A("Both t-shirts are updated."),
        U("Thanks! ###STOP###"),
    ],
    lacking={"structured_data_reasoning": "told the user 12 t-shirt options are available; the product read lists 10 available variants"},
))

MEI_K_OPEN = [
    U("Hi, I want to exchange the water bottle and the desk lamp. I'm mei_kovacs_8020, zip code 28236."),
    A("Happy to help! To verify your identity I need your email, or your first name, last name and zip code."),
    U("Mei Kovacs, 28236. I don't remember my email."),
    call("find_user_id_by_name_zip", first_name="Mei", last_name="Kovacs", zip="28236"),
    call("get_user_details", user_id="mei_kovacs_8020"),
    call("get_order_details", order_id="#W6390527"),
    A("Both are in delivered order #W6390527: a water bottle (500ml, glass, black) and a desk lamp (white, medium brightness, USB). "
      "What would you like them exchanged for?"),
    U("A bigger water bottle, and a less bright desk lamp. For the lamp I prefer battery, then USB, then AC."),
    call("get_product_details", product_id="8310926033"),
    call("get_product_details", product_id="6817146515"),
]
add(Case(
    id="ret-28-lamp-preference-ignored", domain="retail", task="6", split="holdout", expect="failure",
    turns=MEI_K_OPEN + [
        A("Options: water bottle 750ml glass black (4579334072, $54.85); desk lamp with low brightness, black, USB (9190635437, "
          "$153.23). Exchanging both: you'd pay $25.01 via PayPal. Please confirm all the items to exchange, then I'll proceed."),
        U("Actually, only exchange the desk lamp."),
        A("Exchange only the desk lamp 8384507844 for 9190635437 (black, low, USB), paying $15.29 via PayPal. Proceed? (yes/no)"),
        U("Yes."),
        call("exchange_delivered_order_items", order_id="#W6390527", item_ids=["8384507844"], new_item_ids=["9190635437"],
             payment_method_id="paypal_7644869"),
        A("Done, the exchange of the desk lamp is requested."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"structured_data_reasoning": "the user preferred a battery-powered lamp; 7453605304 (silver, low, battery) was available "
                                          "in the product read, and the agent chose a USB one"},
))
add(Case(
    id="ret-29-lamp-battery", domain="retail", task="6", split="tune", expect="success",
    turns=MEI_K_OPEN + [
        A("Options: water bottle 750ml glass black (4579334072, $54.85); desk lamp with low brightness and battery power (7453605304, "
          "silver, $150.01). Shall I exchange both? Please confirm."),
        U("Only exchange the desk lamp."),
        A("Exchange the desk lamp 8384507844 for 7453605304 (silver, low, battery), paying $12.07 via PayPal. Proceed? (yes/no)"),
        U("Yes."),
        call("exchange_delivered_order_items", order_id="#W6390527", item_ids=["8384507844"], new_item_ids=["7453605304"],
             payment_method_id="paypal_7644869"),
        A("Done."),
        U("Thanks! ###STOP###"),
    ],
))
add(Case(
    id="ret-30-user-invents-order", domain="retail", task="16", split="tune", expect="failure", cause="user_simulator",
    turns=[
        U("Hi, I want to cancel my pending order #W1111111 and return a watch. I'm Fatima Johnson, zip 78712."),
        call("find_user_id_by_name_zip", first_name="Fatima", last_name="Johnson", zip="78712"),
        call("get_order_details", order_id="#W1111111"),
        A("I couldn't find order #W1111111. Could you double-check the order number?"),
        U("That's the number I have. Never mind, I'll call back. ###STOP###"),
    ],
    note="The simulator gave an order id its instructions do not contain, and left.",
))
